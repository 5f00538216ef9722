import { Value, shapesEqual } from '@tilegraph/ir';
import { Emitter, NodeContext } from './context.js';

/**
 * The optimizer ops of the ai.onnx.preview.training domain (Adagrad, Momentum, Adam), written as
 * element-wise IR ops. Each takes a learning rate R, an update count T and n groups of tensors
 * (weights X, gradients G, then one or two optimizer states); it returns the n new weights
 * followed by the n new states of each kind. The formulas are those of the operator
 * specification (its Python reference), tensor by tensor.
 */

interface Groups {
  readonly r: Value;
  /** The update count as float32 (T is an int64 scalar). */
  readonly t: Value;
  /** groups[k][i]: tensor i of kind k (0: X, 1: G, then the states). */
  readonly groups: Value[][];
}

/** Splits the inputs after R and T into `kinds` equal groups, checking shapes pair by pair. */
function groupsOf(c: NodeContext, kinds: number): Groups {
  const xs = c.allInputs();
  const rest = xs.slice(2);
  if (rest.length === 0 || rest.length % kinds !== 0) {
    c.fail(`takes R, T and ${kinds} groups of equally many tensors, but has ${rest.length} tensors after R and T`);
  }
  const n = rest.length / kinds;
  const groups = [...Array(kinds).keys()].map((k) => rest.slice(k * n, (k + 1) * n));
  for (let i = 0; i < n; i++) {
    const x = groups[0]![i]!;
    for (let k = 1; k < kinds; k++) {
      const y = groups[k]![i]!;
      if (!shapesEqual(x.type.shape, y.type.shape) || x.type.dtype !== y.type.dtype) {
        c.fail(`tensor ${i} of group ${k + 1} is ${y.type.dtype}[${y.type.shape.join(',')}] but its weight is ${x.type.dtype}[${x.type.shape.join(',')}]`);
      }
    }
  }
  const [r, t] = [xs[0]!, xs[1]!];
  if (r.type.shape.length > 1 || t.type.shape.length > 1) c.fail(`R and T must be scalars`);
  return { r: scalarOf(c.e, r), t: scalarOf(c.e, c.e.cast(t, 'float32')), groups };
}

function scalarOf(e: Emitter, v: Value): Value {
  return v.type.shape.length === 0 ? v : e.op('reshape', [v], { shape: [] });
}

/** `v` (a float32 scalar) in the dtype of `like`. */
function as(e: Emitter, v: Value, like: Value): Value {
  return e.cast(v, like.type.dtype);
}

/** norm_coefficient · X + G (the gradient of the L2 regularisation term added). */
function regularized(e: Emitter, x: Value, g: Value, norm: number): Value {
  return norm === 0 ? g : e.add(e.mul(e.like(x, norm), x), g);
}

/** 1 where T > 0, else 0 (float32 scalar): the specification's bias-correction switch. */
function started(e: Emitter, t: Value): Value {
  return e.cast(e.op('greater', [t, e.like(t, 0)]), 'float32');
}

export function adagrad(c: NodeContext): Value[] {
  const e = c.e;
  const { r, t, groups } = groupsOf(c, 3);
  const decay = c.float('decay_factor', 0);
  const eps = c.float('epsilon', 1e-6);
  const norm = c.float('norm_coefficient', 0);
  // r / (1 + T · decay_factor)
  const rate = e.div(e.cast(r, 'float32'), e.add(e.like(t, 1), e.mul(t, e.like(t, decay))));
  const xs: Value[] = [];
  const hs: Value[] = [];
  groups[0]!.forEach((x, i) => {
    const gr = regularized(e, x, groups[1]![i]!, norm);
    const h = e.add(groups[2]![i]!, e.mul(gr, gr));
    const adaptive = e.add(e.unary('sqrt', h), e.like(h, eps));
    xs.push(e.sub(x, e.div(e.mul(as(e, rate, x), gr), adaptive)));
    hs.push(h);
  });
  return [...xs, ...hs];
}

export function momentum(c: NodeContext): Value[] {
  const e = c.e;
  const { r, t, groups } = groupsOf(c, 3);
  const alpha = c.float('alpha');
  const beta = c.float('beta');
  const norm = c.float('norm_coefficient');
  const mode = c.string('mode');
  if (mode !== 'standard' && mode !== 'nesterov') c.fail(`mode must be 'standard' or 'nesterov', got '${mode}'`);
  // beta once T > 0, else 1: beta·s + (1 - s)
  const s = started(e, t);
  const betaAdj = e.add(e.mul(e.like(s, beta), s), e.sub(e.like(s, 1), s));
  const xs: Value[] = [];
  const vs: Value[] = [];
  groups[0]!.forEach((x, i) => {
    const gr = regularized(e, x, groups[1]![i]!, norm);
    const v = e.add(e.mul(e.like(x, alpha), groups[2]![i]!), e.mul(as(e, betaAdj, x), gr));
    const step = mode === 'standard' ? v : e.add(gr, e.mul(e.like(v, alpha), v));
    xs.push(e.sub(x, e.mul(as(e, r, x), step)));
    vs.push(v);
  });
  return [...xs, ...vs];
}

export function adam(c: NodeContext): Value[] {
  const e = c.e;
  const { r, t, groups } = groupsOf(c, 4);
  const alpha = c.float('alpha', 0.9);
  const beta = c.float('beta', 0.999);
  const eps = c.float('epsilon', 1e-6);
  const norm = c.float('norm_coefficient', 0);
  const post = c.float('norm_coefficient_post', 0);
  // with T > 0: R · sqrt(1 - beta^T) / (1 - alpha^T); else R
  const s = started(e, t);
  const pw = (b: number): Value => e.op('pow', [e.like(t, b), t]);
  const corrected = e.div(e.unary('sqrt', e.sub(e.like(t, 1), pw(beta))), e.sub(e.like(t, 1), pw(alpha)));
  const factor = e.op('where', [e.op('greater', [t, e.like(t, 0)]), corrected, e.like(s, 1)]);
  const rate = e.mul(e.cast(r, 'float32'), factor);
  const xs: Value[] = [];
  const vs: Value[] = [];
  const hs: Value[] = [];
  groups[0]!.forEach((x, i) => {
    const gr = regularized(e, x, groups[1]![i]!, norm);
    const v = e.add(e.mul(e.like(x, alpha), groups[2]![i]!), e.mul(e.like(x, 1 - alpha), gr));
    const h = e.add(e.mul(e.like(x, beta), groups[3]![i]!), e.mul(e.like(x, 1 - beta), e.mul(gr, gr)));
    const hSqrt = e.add(e.unary('sqrt', h), e.like(h, eps));
    const xNew = e.sub(x, e.mul(as(e, rate, x), e.div(v, hSqrt)));
    xs.push(post === 0 ? xNew : e.mul(e.like(xNew, 1 - post), xNew));
    vs.push(v);
    hs.push(h);
  });
  return [...xs, ...vs, ...hs];
}
