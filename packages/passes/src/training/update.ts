import { DType, GraphBuilder, Tensor, Value } from '@tilegraph/ir';
import { OptimizerSpec, groupHyper, groupIndex, hyperVariableName } from './optimizer.js';
import { placementOf } from './placement.js';

/** One weight to update: its current value and its reduced gradient, both read in the update graph. */
export interface WeightUpdate {
  readonly name: string;
  readonly weight: Value;
  readonly grad: Value;
  /** The variable the new weight is written to (the weight's shard under replicated tensor sharding); default `name`. */
  readonly store?: string;
  /** The weight's name scope in the model: its update is emitted in `<scope>/update`. */
  readonly scope?: string;
}

/** Emits the arithmetic of an optimizer step; small helpers keep the formulas readable. */
class Emitter {
  constructor(readonly b: GraphBuilder, readonly spec: OptimizerSpec) {}

  private hyperCache = new Map<string, Value>();
  /** The parameter group of the weight being updated (0: the default group). */
  group = 0;

  /** The values of the current group's hyperparameters. */
  get h(): Readonly<Record<string, number>> {
    return groupHyper(this.spec, this.group);
  }

  /**
   * A hyperparameter of the current group: a variable written by setOptimizer (`optimizer.<name>`,
   * or `optimizer.param_groups.<k>.<name>` where group k sets it itself), or a constant.
   */
  hp(name: string): Value {
    const own = this.group > 0 && name in this.spec.paramGroups![this.group - 1]!.hyper;
    const k = own ? this.group : 0;
    const x = groupHyper(this.spec, k)[name]!;
    const constant = this.spec.constant.includes(name);
    const key = `${k}:${name}`;
    let v = this.hyperCache.get(key);
    if (!v) {
      const varName = hyperVariableName(name, k);
      // shared by every weight's update: in no weight's scope
      v = this.b.withScopePath('', () =>
        constant
          ? this.b.scalar('float32', x)
          : this.b.op('variable', [], { name: varName, dtype: 'float32', shape: [], init: Tensor.scalar('float32', x), role: 'hyperparameter' }, { names: [varName] }),
      );
      this.hyperCache.set(key, v);
    }
    return v;
  }
  c(x: number): Value {
    return this.b.scalar('float32', x);
  }
  add = (a: Value, b: Value) => this.b.op('add', [a, b]);
  sub = (a: Value, b: Value) => this.b.op('sub', [a, b]);
  mul = (a: Value, b: Value) => this.b.op('mul', [a, b]);
  div = (a: Value, b: Value) => this.b.op('div', [a, b]);
  sqrt = (a: Value) => this.b.op('sqrt', [a]);
  square = (a: Value) => this.b.op('mul', [a, a]);
  /** 1 - x */
  oneMinus = (x: Value) => this.sub(this.c(1), x);
  /** a·x + (1 - a)·y: an exponential moving average step. */
  ema = (a: Value, x: Value, y: Value) => this.add(this.mul(a, x), this.mul(this.oneMinus(a), y));
  norm = (x: Value) => this.sqrt(this.b.op('reduce_sum', [this.square(x)], { axes: [], keepdims: false }));
  /** Whether a term scaled by hyperparameter `name` must be emitted: variable, or a non-zero constant. */
  hasTerm = (name: string) => !this.spec.constant.includes(name) || this.h[name] !== 0;
  cast = (x: Value, to: DType) => (x.type.dtype === to ? x : this.b.op('cast', [x], { to }));

  /** Reads optimizer state `<weight>.<slot>` (zeros initially, or ones), as float32 for the arithmetic. */
  state(w: WeightUpdate, slot: string, dtype: DType, start: 'zeros' | 'ones' = 'zeros'): Value {
    const v = this.b.op(
      'variable',
      [],
      { name: `${w.name}.${slot}`, dtype, shape: [...w.weight.type.shape], init: { kind: 'init', fn: start, args: {} }, role: 'optimizer_state' },
      { names: [`${w.name}.${slot}`] },
    );
    return this.cast(v, 'float32');
  }
  store(name: string, value: Value, dtype: DType): void {
    this.b.addOp('assign', [this.cast(value, dtype)], { name });
  }
}

/**
 * Emits one optimizer step for every weight into `b` (the update graph): gradient unscaling
 * (loss scaling), global-norm clipping, the optimizer's rule with torch's formulas, and the
 * writes of weights, optimizer state and the step counter. `step` is the float32 step number t
 * (1 on the first step).
 */
export function emitOptimizerStep(b: GraphBuilder, spec: OptimizerSpec, weights: readonly WeightUpdate[], step: Value): void {
  const e = new Emitter(b, spec);
  const f32 = (x: Value) => e.cast(x, 'float32');
  // gradients carry the loss scale from the seed of the backward pass; each weight's gradient is
  // unscaled (and clipped) where its update uses it, so that no full-size copy of every gradient
  // is live at once
  const inv = spec.hyper['loss_scaling'] !== 1 || !spec.constant.includes('loss_scaling') ? e.div(e.c(1), e.hp('loss_scaling')) : undefined;
  const unscaled = (w: WeightUpdate) => (inv ? e.mul(f32(w.grad), inv) : f32(w.grad));
  let clip: Value | undefined;
  if (Number.isFinite(spec.hyper['max_grad_norm'])) {
    // torch.nn.utils.clip_grad_norm_: coef = max / (total + 1e-6), applied when below 1
    let total: Value | undefined;
    for (const w of weights) {
      const s = b.op('reduce_sum', [e.square(unscaled(w))], { axes: [], keepdims: false });
      total = total ? e.add(total, s) : s;
    }
    const coef = e.div(e.hp('max_grad_norm'), e.add(e.sqrt(total!), e.c(1e-6)));
    clip = b.op('min', [coef, e.c(1)]);
  }
  const flags = spec.flags;
  const groupOf = groupIndex(spec);
  const m1 = spec.firstOrderMomentumAccumType;
  const m2 = spec.secondOrderMomentumAccumType;
  weights.forEach((w) => b.withScopePath(w.scope ? `${w.scope}/update` : '', () => emitWeight(w)));
  function emitWeight(w: WeightUpdate): void {
    // each weight's update and optimizer state carry the weight's own location and placement
    b.loc = w.weight.producer.loc;
    b.annotations = placementOf(w.weight.producer);
    // the structure of the update (momentum on or off, ...) follows the weight's own group
    e.group = groupOf.get(w.name) ?? 0;
    const h = e.h;
    const g0 = clip ? e.mul(unscaled(w), clip) : unscaled(w);
    const wt = f32(w.weight);
    let next: Value;
    switch (spec.type) {
      case 'SGD': {
        let d = e.hasTerm('weight_decay') ? e.add(g0, e.mul(e.hp('weight_decay'), wt)) : g0;
        if (h['momentum'] !== 0) {
          const vs = e.hp('velocity_scaling');
          const buf = e.div(e.state(w, 'momentum', m1), vs);
          const later = e.add(e.mul(e.hp('momentum'), buf), e.mul(e.oneMinus(e.hp('dampening')), d));
          // torch: the first step takes the gradient itself, without dampening
          const first = b.op('equal', [step, e.c(1)]);
          const bufNew = b.op('where', [first, d, later]);
          e.store(`${w.name}.momentum`, e.mul(bufNew, vs), m1);
          d = flags['nesterov'] ? e.add(d, e.mul(e.hp('momentum'), bufNew)) : bufNew;
        }
        next = e.sub(wt, e.mul(e.hp('lr'), d));
        break;
      }
      case 'Adam':
      case 'AdamW': {
        let wd = wt;
        let g = g0;
        if (spec.type === 'AdamW') wd = e.mul(wt, e.oneMinus(e.mul(e.hp('lr'), e.hp('weight_decay'))));
        else if (e.hasTerm('weight_decay')) g = e.add(g0, e.mul(e.hp('weight_decay'), wt));
        const m = e.ema(e.hp('beta1'), e.state(w, 'exp_avg', m1), g);
        const v = e.ema(e.hp('beta2'), e.state(w, 'exp_avg_sq', m2), e.square(g));
        e.store(`${w.name}.exp_avg`, m, m1);
        e.store(`${w.name}.exp_avg_sq`, v, m2);
        let vUse = v;
        if (flags['amsgrad']) {
          vUse = b.op('max', [e.state(w, 'max_exp_avg_sq', m2), v]);
          e.store(`${w.name}.max_exp_avg_sq`, vUse, m2);
        }
        let upd: Value;
        if (flags['bias_correction']) {
          const bc1 = e.oneMinus(b.op('pow', [e.hp('beta1'), step]));
          const bc2 = e.oneMinus(b.op('pow', [e.hp('beta2'), step]));
          // torch: (lr / bc1) · m / (sqrt(v) / sqrt(bc2) + eps) — eps after the correction
          upd = e.mul(e.div(e.hp('lr'), bc1), e.div(m, e.add(e.div(e.sqrt(vUse), e.sqrt(bc2)), e.hp('eps'))));
        } else {
          upd = e.mul(e.hp('lr'), e.div(m, e.add(e.sqrt(vUse), e.hp('eps'))));
        }
        next = e.sub(wd, upd);
        break;
      }
      case 'RMSprop': {
        const g = e.hasTerm('weight_decay') ? e.add(g0, e.mul(e.hp('weight_decay'), wt)) : g0;
        // PopTorch's TensorFlow variant starts the squared-gradient average at ones
        const v = e.ema(e.hp('alpha'), e.state(w, 'square_avg', m2, flags['use_tf_variant'] ? 'ones' : 'zeros'), e.square(g));
        e.store(`${w.name}.square_avg`, v, m2);
        let avg: Value;
        if (flags['use_tf_variant']) {
          // TensorFlow's form: eps inside the square root
          avg = e.sqrt(e.add(v, e.hp('eps')));
        } else if (flags['centered']) {
          const ga = e.ema(e.hp('alpha'), e.state(w, 'grad_avg', m1), g);
          e.store(`${w.name}.grad_avg`, ga, m1);
          avg = e.add(e.sqrt(e.sub(v, e.square(ga))), e.hp('eps'));
        } else {
          avg = e.add(e.sqrt(v), e.hp('eps'));
        }
        if (flags['centered'] && flags['use_tf_variant']) {
          const ga = e.ema(e.hp('alpha'), e.state(w, 'grad_avg', m1), g);
          e.store(`${w.name}.grad_avg`, ga, m1);
          avg = e.sqrt(e.add(e.sub(v, e.square(ga)), e.hp('eps')));
        }
        if (h['momentum'] !== 0) {
          const stepDir = flags['use_tf_variant'] ? e.mul(e.hp('lr'), e.div(g, avg)) : e.div(g, avg);
          const buf = e.add(e.mul(e.hp('momentum'), e.state(w, 'momentum_buffer', m1)), stepDir);
          e.store(`${w.name}.momentum_buffer`, buf, m1);
          next = flags['use_tf_variant'] ? e.sub(wt, buf) : e.sub(wt, e.mul(e.hp('lr'), buf));
        } else {
          next = e.sub(wt, e.mul(e.hp('lr'), e.div(g, avg)));
        }
        break;
      }
      case 'LAMB': {
        const m = e.ema(e.hp('beta1'), e.state(w, 'exp_avg', m1), g0);
        const v = e.ema(e.hp('beta2'), e.state(w, 'exp_avg_sq', m2), e.square(g0));
        e.store(`${w.name}.exp_avg`, m, m1);
        e.store(`${w.name}.exp_avg_sq`, v, m2);
        let mh = m;
        let vh = v;
        if (flags['bias_correction']) {
          mh = e.div(m, e.oneMinus(b.op('pow', [e.hp('beta1'), step])));
          vh = e.div(v, e.oneMinus(b.op('pow', [e.hp('beta2'), step])));
        }
        const r = e.div(mh, e.add(e.sqrt(vh), e.hp('eps')));
        const u = e.add(r, e.mul(e.hp('weight_decay'), wt));
        const wn = e.norm(wt);
        const un = e.norm(u);
        const phi = Number.isFinite(h['max_weight_norm']) ? b.op('min', [wn, e.hp('max_weight_norm')]) : wn;
        const ok = b.op('and', [b.op('greater', [wn, e.c(0)]), b.op('greater', [un, e.c(0)])]);
        const trust = b.op('where', [ok, e.div(phi, un), e.c(1)]);
        next = e.sub(wt, e.mul(e.mul(e.hp('lr'), trust), u));
        break;
      }
    }
    e.store(w.store ?? w.name, next, w.weight.type.dtype);
  }
}
