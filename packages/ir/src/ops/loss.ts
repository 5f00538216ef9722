import { Attrs } from '../attributes.js';
import { DiagnosticError, error } from '../diagnostics.js';
import { dtypeShortName, isFloat } from '../dtype.js';
import { fromValues } from '../kernels/elementwise.js';
import { softmaxValues } from '../kernels/softmax.js';
import type { GraphBuilder } from '../builder.js';
import type { Value } from '../graph.js';
import { OpDef, defineOp } from '../opdef.js';
import { Shape, ShapeError, TensorType, formatShape, numElements } from '../shape.js';
import { Tensor } from '../tensor.js';
import { maskLike, scalarLike } from './gradutil.js';
import { logSoftmaxBackward } from './softmax.js';

/**
 * Classification losses with torch semantics: input [N,C] or [N,C,d...] (or unbatched [C]),
 * integer class targets [N] or [N,d...] (or []), optional per-class weight [C].
 */

/** The target shape an input of this shape needs: the input without its class dim. */
function targetShapeFor(input: Shape): number[] {
  return input.length === 1 ? [] : [input[0]!, ...input.slice(2)];
}

function inferLoss(types: readonly TensorType[], attrs: Attrs): TensorType[] {
  const [x, target, weight] = types;
  if (!isFloat(x!.dtype)) throw new ShapeError(`input must be float, got ${dtypeShortName(x!.dtype)}`);
  if (target!.dtype !== 'int32') throw new ShapeError(`target must be i32 class indices, got ${dtypeShortName(target!.dtype)}`);
  const xs = x!.shape;
  if (xs.length === 0) throw new ShapeError('input must be [C], [N,C] or [N,C,d...], got []');
  const want = targetShapeFor(xs);
  const ts = target!.shape;
  if (ts.length !== want.length || ts.some((d, i) => d !== want[i])) {
    throw new ShapeError(`target ${formatShape(ts)} does not match input ${formatShape(xs)} (expected target ${formatShape(want)})`);
  }
  const c = xs.length === 1 ? xs[0]! : xs[1]!;
  if (weight) {
    if (weight.dtype !== x!.dtype) {
      throw new ShapeError(`weight has type ${dtypeShortName(weight.dtype)} but the input has ${dtypeShortName(x!.dtype)} (insert a cast)`);
    }
    if (weight.shape.length !== 1 || weight.shape[0] !== c) {
      throw new ShapeError(`weight ${formatShape(weight.shape)} must have shape [${c}] (the classes of input ${formatShape(xs)})`);
    }
  }
  const ls = attrs['label_smoothing'] as number | undefined;
  if (ls !== undefined && !(ls >= 0 && ls <= 1)) throw new ShapeError(`label_smoothing must be in [0, 1], got ${ls}`);
  return [{ dtype: x!.dtype, shape: attrs['reduction'] === 'none' ? want : [] }];
}

/**
 * Negative log-likelihood of class log-probabilities `logp` (float64, layout [N,C,S]) with
 * optional label smoothing, reduced as torch does: 'mean' divides by the summed weight of the
 * targets that are not ignored.
 */
function nllValues(
  op: string,
  logp: ArrayLike<number>,
  inputShape: Shape,
  target: Tensor,
  weight: Tensor | undefined,
  attrs: Attrs,
): { values: Float64Array; shape: number[] } {
  const reduction = attrs['reduction'] as string;
  const ignore = attrs['ignore_index'] as number | undefined;
  const eps = (attrs['label_smoothing'] as number | undefined) ?? 0;
  const C = inputShape.length === 1 ? inputShape[0]! : inputShape[1]!;
  const S = numElements(inputShape.slice(2));
  const count = target.size;
  const w = weight?.data;
  const losses = new Float64Array(count);
  let total = 0;
  let denom = 0;
  for (let i = 0; i < count; i++) {
    const t = target.data[i]!;
    if (ignore !== undefined && t === ignore) continue; // contributes 0 and no weight
    if (t < 0 || t >= C) {
      throw new DiagnosticError(error(`${op}: target ${t} at position ${i} is out of range [0, ${C})${ignore === undefined ? '' : ` and is not ignore_index ${ignore}`}`));
    }
    const n = Math.floor(i / S);
    const base = n * C * S + (i % S);
    const wt = w ? w[t]! : 1;
    // 0 - x rather than -x: a certain prediction loses +0, not -0
    let loss = 0 - wt * logp[base + t * S]!;
    if (eps !== 0) {
      let smooth = 0;
      for (let c = 0; c < C; c++) smooth -= (w ? w[c]! : 1) * logp[base + c * S]!;
      loss = (1 - eps) * loss + (eps / C) * smooth;
    }
    losses[i] = loss;
    total += loss;
    denom += wt;
  }
  if (reduction === 'none') return { values: losses, shape: [...target.shape] };
  // all targets ignored: 0/0 = NaN, as torch
  return { values: Float64Array.of(reduction === 'sum' ? total : total / denom), shape: [] };
}

// ---- gradients ----

/**
 * Gradient of the loss with respect to the log-probabilities (shape of `input`):
 * -s_i · valid_i · ((1-ε)·w[t_i]·[c = t_i] + ε/C·w[c]), where s_i is g_i ('none'), g ('sum') or
 * g / Σ_i valid_i·w[t_i] ('mean').
 */
function nllBackward(b: GraphBuilder, g: Value, input: Value, target: Value, weight: Value | undefined, attrs: Attrs): Value {
  const shape = input.type.shape;
  const rank = shape.length;
  const classAxis = rank === 1 ? 0 : 1;
  const C = shape[classAxis]!;
  const eps = (attrs['label_smoothing'] as number | undefined) ?? 0;
  const ignore = attrs['ignore_index'] as number | undefined;
  const reduction = attrs['reduction'] as string;
  const classView = rank === 1 ? [C] : [1, C, ...shape.slice(2).map(() => 1)];
  const classes = b.constant(Tensor.from('int32', classView, Array.from({ length: C }, (_, i) => i)));
  const t = b.op('unsqueeze', [target], { axes: [classAxis] });
  let hits = maskLike(b, b.op('equal', [t, classes]), input);
  let valid: Value | undefined;
  if (ignore !== undefined) {
    valid = maskLike(b, b.op('not', [b.op('equal', [t, b.scalar('int32', ignore)])]), input);
    hits = b.op('mul', [hits, valid]);
  }
  const w = weight ? b.op('reshape', [weight], { shape: classView }) : undefined;
  // valid_i·w[t_i]·[c = t_i]
  const weighted = w ? b.op('mul', [hits, w]) : hits;
  let coef = weighted;
  if (eps !== 0) {
    let smooth = w ? b.op('mul', [w, scalarLike(b, input, eps / C)]) : scalarLike(b, input, eps / C);
    if (valid) smooth = b.op('mul', [smooth, valid]);
    coef = b.op('add', [b.op('mul', [weighted, scalarLike(b, input, 1 - eps)]), smooth]);
  }
  let s: Value;
  if (reduction === 'none') s = b.op('unsqueeze', [g], { axes: [classAxis] });
  else if (reduction === 'sum') s = g;
  else s = b.op('div', [g, b.op('reduce_sum', [weighted], { axes: [] })]);
  return b.op('neg', [b.op('mul', [coef, s])]);
}

const reductionAttr = { type: 'string', default: 'mean', values: ['mean', 'sum', 'none'] } as const;
const ignoreAttr = { type: 'int', optional: true, doc: 'targets equal to this contribute nothing (absent: none ignored)' } as const;
const lossOperands = [{ name: 'input' }, { name: 'target', differentiable: false }, { name: 'weight', optional: true, differentiable: false }];

export const nll_loss = defineOp({
  name: 'nll_loss',
  family: 'loss',
  doc: 'Negative log-likelihood of log-probabilities at integer class targets (torch nll_loss): -weight[t]·logp[t], reduced by mean (divided by the total weight of non-ignored targets), sum or none.',
  operands: lossOperands,
  attrs: { reduction: reductionAttr, ignore_index: ignoreAttr },
  infer: inferLoss,
  kernel: ([logp, target, weight], attrs) => {
    const r = nllValues('nll_loss', logp!.data, logp!.shape, target!, weight, attrs);
    return [fromValues(logp!.dtype, r.shape, r.values)];
  },
  grad: ({ b, op, inputs, outputGrads }) => {
    const g = outputGrads[0];
    if (!g) return inputs.map(() => undefined);
    const dlogp = nllBackward(b, g, inputs[0]!, inputs[1]!, inputs[2], op.attrs);
    return inputs.map((_, i) => (i === 0 ? dlogp : undefined));
  },
  // only the input's shape is needed, not its values
  saves: { operands: [1, 2] },
});

export const cross_entropy = defineOp({
  name: 'cross_entropy',
  family: 'loss',
  doc: 'nll_loss of log_softmax over the class dim (torch cross_entropy with class-index targets), with optional label smoothing: (1-ε)·nll + ε/C·Σ_c -weight[c]·logp[c].',
  operands: lossOperands,
  attrs: {
    reduction: reductionAttr,
    ignore_index: ignoreAttr,
    label_smoothing: { type: 'float', default: 0 },
  },
  infer: inferLoss,
  kernel: ([logits, target, weight], attrs) => {
    const classAxis = logits!.shape.length === 1 ? 0 : 1;
    const logp = softmaxValues(logits!.data, logits!.shape, classAxis, true);
    const r = nllValues('cross_entropy', logp, logits!.shape, target!, weight, attrs);
    return [fromValues(logits!.dtype, r.shape, r.values)];
  },
  // nll_loss's gradient taken back through log_softmax over the class dim
  grad: ({ b, op, inputs, outputGrads }) => {
    const g = outputGrads[0];
    if (!g) return inputs.map(() => undefined);
    const x = inputs[0]!;
    const classAxis = x.type.shape.length === 1 ? 0 : 1;
    const logp = b.op('log_softmax', [x], { axis: classAxis });
    const dlogp = nllBackward(b, g, x, inputs[1]!, inputs[2], op.attrs);
    const dx = logSoftmaxBackward(b, dlogp, logp, classAxis);
    return inputs.map((_, i) => (i === 0 ? dx : undefined));
  },
  saves: { operands: [0, 1, 2] },
});

export const LOSS_OPS: OpDef[] = [nll_loss, cross_entropy];
