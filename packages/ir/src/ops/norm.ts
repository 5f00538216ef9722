import { Attrs } from '../attributes.js';
import { DiagnosticError, error } from '../diagnostics.js';
import { dtypeShortName, isFloat } from '../dtype.js';
import { broadcastStrides, fromValues } from '../kernels/elementwise.js';
import type { GraphBuilder } from '../builder.js';
import type { Value } from '../graph.js';
import { OpDef, defineOp } from '../opdef.js';
import { Shape, ShapeError, TensorType, formatShape, normalizeAxis, numElements, shapesEqual, stridesOf } from '../shape.js';
import { normalizeBackward, normalizeStats, scalarLike, sumToShape } from './gradutil.js';

/** Normalisations: batch, layer and group norm. All statistics are computed in float64, two-pass. */

const OPERAND_NAMES: Readonly<Record<string, readonly string[]>> = {
  batch_norm: ['x', 'scale', 'bias', 'mean', 'var'],
  layer_norm: ['x', 'scale', 'bias'],
  group_norm: ['x', 'scale', 'bias'],
};

function checkFloatOperands(op: string, types: readonly TensorType[]): void {
  const d = types[0]!.dtype;
  if (!isFloat(d)) throw new ShapeError(`input must be float, got ${dtypeShortName(d)}`);
  types.forEach((t, i) => {
    if (t.dtype !== d) {
      throw new ShapeError(`${OPERAND_NAMES[op]![i]} has type ${dtypeShortName(t.dtype)} but the input has ${dtypeShortName(d)} (insert a cast)`);
    }
  });
}

function checkEpsilon(attrs: Attrs): number {
  const eps = attrs['epsilon'] as number;
  if (!(eps >= 0)) throw new ShapeError(`epsilon must be non-negative, got ${eps}`);
  return eps;
}

/** Each per-channel operand (index ≥ 1) must be [C]. */
function checkChannelVectors(op: string, types: readonly TensorType[], c: number): void {
  const x = types[0]!;
  for (let i = 1; i < types.length; i++) {
    const s = types[i]!.shape;
    if (s.length !== 1 || s[0] !== c) {
      throw new ShapeError(`${OPERAND_NAMES[op]![i]} ${formatShape(s)} must have shape [${c}] (the channels, dim 1, of ${formatShape(x.shape)})`);
    }
  }
}

// ---- gradient helpers ----

/** Every axis but the channel axis 1. */
function nonChannelAxes(rank: number): number[] {
  return [0, ...Array.from({ length: rank - 2 }, (_, i) => i + 2)];
}

/** A per-channel [C] vector viewed as [1,C,1,...] to broadcast against x. */
function channelView(b: GraphBuilder, v: Value, rank: number): Value {
  return b.op('reshape', [v], { shape: [1, v.type.shape[0]!, ...Array.from({ length: rank - 2 }, () => 1)] });
}

// ---- batch_norm ----

function batchNormCount(x: Shape): number {
  return x[0]! * numElements(x.slice(2));
}

/** Channel c's mean and sum of squared deviations over N and the S field values (x [N,C,S...]), two-pass in float64. */
function channelMoments(xd: ArrayLike<number>, N: number, C: number, S: number, c: number): { mean: number; squares: number } {
  let s = 0;
  for (let n = 0; n < N; n++) for (let i = 0; i < S; i++) s += xd[(n * C + c) * S + i]!;
  const mean = s / (N * S);
  let q = 0;
  for (let n = 0; n < N; n++) {
    for (let i = 0; i < S; i++) {
      const d = xd[(n * C + c) * S + i]! - mean;
      q += d * d;
    }
  }
  return { mean, squares: q };
}

export const batch_norm = defineOp({
  name: 'batch_norm',
  family: 'norm',
  doc:
    'Batch normalisation over channel dim 1: y = (x - mean) / sqrt(var + epsilon) * scale + bias. Inference uses the running mean/var; ' +
    'training uses the batch statistics (biased variance) and also returns the new running mean and var: running*momentum + batch*(1-momentum), with the unbiased batch variance (torch) or, with unbiased_running_var false, the biased one (ONNX).',
  operands: [{ name: 'x' }, { name: 'scale' }, { name: 'bias' }, { name: 'mean', differentiable: false }, { name: 'var', differentiable: false }],
  attrs: {
    epsilon: { type: 'float', default: 1e-5 },
    momentum: { type: 'float', default: 0.9, doc: 'weight of the old running statistics (ONNX convention)' },
    training: { type: 'bool', default: false },
    unbiased_running_var: { type: 'bool', default: true, doc: "the running variance takes the batch variance unbiased (torch's), or biased (ONNX's BatchNormalization)" },
  },
  infer: (types, attrs) => {
    checkFloatOperands('batch_norm', types);
    checkEpsilon(attrs);
    const x = types[0]!;
    if (x.shape.length < 2) throw new ShapeError(`input must have rank 2 or more [N,C,...], got ${formatShape(x.shape)}`);
    const c = x.shape[1]!;
    checkChannelVectors('batch_norm', types, c);
    const y = { dtype: x.dtype, shape: [...x.shape] };
    if (!attrs['training']) return [y];
    if (batchNormCount(x.shape) <= 1) {
      throw new ShapeError(`training needs more than one value per channel, input ${formatShape(x.shape)} has ${batchNormCount(x.shape)}`);
    }
    return [y, { dtype: x.dtype, shape: [c] }, { dtype: x.dtype, shape: [c] }];
  },
  kernel: ([x, scale, bias, mean, variance], attrs) => {
    const eps = attrs['epsilon'] as number;
    const momentum = attrs['momentum'] as number;
    const training = attrs['training'] as boolean;
    const unbiased = attrs['unbiased_running_var'] as boolean;
    const [N, C] = x!.shape as [number, number];
    const S = numElements(x!.shape.slice(2));
    const count = N * S;
    const xd = x!.data;
    const y = new Float64Array(xd.length);
    const runMean = new Float64Array(C);
    const runVar = new Float64Array(C);
    for (let c = 0; c < C; c++) {
      let mu: number;
      let v: number;
      if (training) {
        const { mean: m, squares: q } = channelMoments(xd, N, C, S, c);
        mu = m;
        v = q / count;
        runMean[c] = mean!.data[c]! * momentum + mu * (1 - momentum);
        runVar[c] = variance!.data[c]! * momentum + (q / (unbiased ? count - 1 : count)) * (1 - momentum);
      } else {
        mu = mean!.data[c]!;
        v = variance!.data[c]!;
      }
      const a = scale!.data[c]! / Math.sqrt(v + eps);
      const b = bias!.data[c]!;
      for (let n = 0; n < N; n++) {
        for (let i = 0; i < S; i++) {
          const k = (n * C + c) * S + i;
          y[k] = (xd[k]! - mu) * a + b;
        }
      }
    }
    const yt = fromValues(x!.dtype, x!.shape, y);
    if (!training) return [yt];
    return [yt, fromValues(x!.dtype, [C], runMean), fromValues(x!.dtype, [C], runVar)];
  },
  /**
   * Training differentiates through the batch statistics (x̂ recomputed from x); inference treats
   * mean/var as constants. The running statistics carry no gradient.
   */
  grad: ({ b, op, inputs, outputGrads }) => {
    const g = outputGrads[0];
    if (!g) return inputs.map(() => undefined);
    const [x, scale, , mean, variance] = inputs as [Value, Value, Value, Value, Value];
    const rank = x.type.shape.length;
    const axes = nonChannelAxes(rank);
    const eps = op.attrs['epsilon'] as number;
    const gh = b.op('mul', [g, channelView(b, scale, rank)]);
    let dx: Value;
    let xhat: Value;
    if (op.attrs['training']) {
      // one op for the three gradients (PopART's BatchNormGradOp), which the code generator
      // lowers to PopLibs' batch norm gradients: a few passes over x and g, not a chain of them
      return [...b.ops('batch_norm_grad', [g, x, scale], { epsilon: eps }), undefined, undefined];
    } else {
      const rstd = b.op('reciprocal', [b.op('sqrt', [b.op('add', [variance, scalarLike(b, variance, eps)])])]);
      const rstdC = channelView(b, rstd, rank);
      xhat = b.op('mul', [b.op('sub', [x, channelView(b, mean, rank)]), rstdC]);
      dx = b.op('mul', [gh, rstdC]);
    }
    const dscale = b.op('reduce_sum', [b.op('mul', [g, xhat])], { axes });
    const dbias = b.op('reduce_sum', [g], { axes });
    return [dx, dscale, dbias, undefined, undefined];
  },
  saves: { operands: [0, 1, 3, 4] },
});

/**
 * The batch statistics of training-mode batch norm as PopLibs' batchNormStatistics makes them:
 * per channel (dim 1) over every other axis, the mean and inv_std = 1/sqrt(var + epsilon) with
 * the biased variance, two-pass. The decompose pass builds training-mode batch_norm from it, so
 * the code generator computes the statistics in one library call rather than in reductions of
 * element-wise passes. With M values per channel, d mean/dx = 1/M and d inv_std/dx = -inv_std³·(x - mean)/M.
 */
export const batch_norm_stats = defineOp({
  name: 'batch_norm_stats',
  family: 'norm',
  doc: 'Batch statistics of x[N,C,...] per channel (PopLibs batchNormStatistics): mean [C] and inv_std [C] = 1/sqrt(var + epsilon), the variance biased, both over every axis but 1.',
  operands: [{ name: 'x' }],
  attrs: { epsilon: { type: 'float', default: 1e-5 } },
  infer: ([x], attrs) => {
    checkEpsilon(attrs);
    if (!isFloat(x!.dtype)) throw new ShapeError(`x must be float, got ${dtypeShortName(x!.dtype)}`);
    if (x!.shape.length < 2) throw new ShapeError(`x must have rank 2 or more [N,C,...], got ${formatShape(x!.shape)}`);
    if (batchNormCount(x!.shape) < 1) throw new ShapeError(`x ${formatShape(x!.shape)} has no values per channel`);
    const c = x!.shape[1]!;
    return [{ dtype: x!.dtype, shape: [c] }, { dtype: x!.dtype, shape: [c] }];
  },
  kernel: ([x], attrs) => {
    const eps = attrs['epsilon'] as number;
    const [N, C] = x!.shape as [number, number];
    const S = numElements(x!.shape.slice(2));
    const xd = x!.data;
    const mean = new Float64Array(C);
    const invStd = new Float64Array(C);
    for (let c = 0; c < C; c++) {
      const m = channelMoments(xd, N, C, S, c);
      mean[c] = m.mean;
      invStd[c] = 1 / Math.sqrt(m.squares / (N * S) + eps);
    }
    return [fromValues(x!.dtype, [C], mean), fromValues(x!.dtype, [C], invStd)];
  },
  grad: ({ b, inputs, outputs, outputGrads }) => {
    const [gm, gr] = outputGrads;
    if (!gm && !gr) return [undefined];
    const x = inputs[0]!;
    const rank = x.type.shape.length;
    const axes = nonChannelAxes(rank);
    const count = batchNormCount(x.type.shape);
    const perValue = (v: Value) => b.op('div', [channelView(b, v, rank), scalarLike(b, x, count)]);
    let dx: Value | undefined = gm ? b.op('expand', [perValue(gm)], { shape: [...x.type.shape] }) : undefined;
    if (gr) {
      const r = channelView(b, outputs[1]!, rank);
      const d = b.op('sub', [x, b.op('reduce_mean', [x], { axes, keepdims: true })]);
      const viaR = b.op('mul', [b.op('neg', [b.op('mul', [b.op('mul', [r, r]), r])]), b.op('mul', [d, perValue(gr)])]);
      dx = dx ? b.op('add', [dx, viaR]) : viaR;
    }
    return [dx];
  },
  saves: { operands: [0], results: [1] },
});

/**
 * The gradient of batch_norm_grad (double backward), per channel with M the values per channel,
 * x̂ and r = rstd recomputed from x, s = scale, m = mean(g·x̂) and P(g) = g - mean(g) - x̂·m (so
 * dx = s·r·P(g)), and upstream gradients Gx, Gs, Gb of dx, dscale, dbias:
 *   grad g = Gb + Gs·x̂ + s·r·P(Gx)  (P is symmetric),
 *   grad scale = Σ Gx·r·P(g),
 *   grad x = r·(u - mean(u) - x̂·mean(u·x̂)) - s·r²·mean(Gx·P(g))·x̂, with u = Gs·g - s·r·(Gx·m + mean(Gx·x̂)·g)
 * (u is the gradient with respect to x̂ at fixed r, and the last term the path through r).
 */
function batchNormGradGrad(b: GraphBuilder, eps: number, [g, x, scale]: readonly [Value, Value, Value], [gx, gs, gb]: readonly (Value | undefined)[]): (Value | undefined)[] {
  const rank = x.type.shape.length;
  const axes = nonChannelAxes(rank);
  const mean = (v: Value) => b.op('reduce_mean', [v], { axes, keepdims: true });
  const mul = (u: Value, v: Value) => b.op('mul', [u, v]);
  const sub = (u: Value, v: Value) => b.op('sub', [u, v]);
  const add = (u: Value | undefined, v: Value) => (u ? b.op('add', [u, v]) : v);
  const { xhat, rstd } = normalizeStats(b, x, axes, eps);
  const s = channelView(b, scale, rank);
  const project = (v: Value) => sub(sub(v, mean(v)), mul(xhat, mean(mul(v, xhat))));
  const m = mean(mul(g, xhat));
  const pg = sub(sub(g, mean(g)), mul(xhat, m));
  let dg: Value | undefined = gb ? b.op('expand', [channelView(b, gb, rank)], { shape: [...g.type.shape] }) : undefined;
  if (gs) dg = add(dg, mul(channelView(b, gs, rank), xhat));
  if (gx) dg = add(dg, mul(mul(s, rstd), project(gx)));
  const dscale = gx ? b.op('reduce_sum', [mul(mul(gx, rstd), pg)], { axes }) : undefined;
  // the gradient with respect to x̂ at fixed r
  let u: Value | undefined = gs ? mul(channelView(b, gs, rank), g) : undefined;
  if (gx) {
    const viaDx = mul(mul(s, rstd), b.op('add', [mul(gx, m), mul(mean(mul(gx, xhat)), g)]));
    u = u ? sub(u, viaDx) : b.op('neg', [viaDx]);
  }
  let dx: Value | undefined = u ? mul(rstd, project(u)) : undefined;
  if (dx && gx) dx = sub(dx, mul(mul(mul(s, mul(rstd, rstd)), mean(mul(gx, pg))), xhat));
  return [dg, dx, dscale];
}

/**
 * The gradients of training-mode batch norm, from the output gradient g, the input x and scale:
 * with the batch statistics recomputed from x (mean, biased variance, rstd = 1/sqrt(var + eps),
 * x̂ = (x - mean)·rstd) and gh = g·scale, dx = ((gh - mean(gh)) - x̂·mean(gh·x̂))·rstd,
 * dscale = Σ g·x̂ and dbias = Σ g, the means and sums per channel over every other axis.
 */
export const batch_norm_grad = defineOp({
  name: 'batch_norm_grad',
  family: 'norm',
  doc:
    'Gradients of training-mode batch_norm (PopART BatchNormGradOp, PopLibs batchNormGradients and batchNormParamGradients): from g (the gradient of y), x and scale [C], ' +
    'the batch statistics recomputed from x, returns dx (the gradient through the statistics), dscale and dbias [C]. ' +
    "With mean and inv_std (x's batch_norm_stats with the same epsilon, which the decompose pass passes on from the forward), the op uses them instead of computing them again.",
  operands: [{ name: 'g' }, { name: 'x' }, { name: 'scale' }, { name: 'mean', optional: true, differentiable: false }, { name: 'inv_std', optional: true, differentiable: false }],
  attrs: { epsilon: { type: 'float', default: 1e-5 } },
  infer: (types, attrs) => {
    const [g, x, scale] = types as [TensorType, TensorType, TensorType];
    checkEpsilon(attrs);
    if (!isFloat(x.dtype)) throw new ShapeError(`x must be float, got ${dtypeShortName(x.dtype)}`);
    if (g.dtype !== x.dtype || scale.dtype !== x.dtype) throw new ShapeError(`g, x and scale must have one float type, got ${dtypeShortName(g.dtype)}, ${dtypeShortName(x.dtype)} and ${dtypeShortName(scale.dtype)}`);
    if (x.shape.length < 2) throw new ShapeError(`x must have rank 2 or more [N,C,...], got ${formatShape(x.shape)}`);
    if (!shapesEqual(g.shape, x.shape)) throw new ShapeError(`g ${formatShape(g.shape)} must have the shape of x ${formatShape(x.shape)}`);
    const c = x.shape[1]!;
    if (scale.shape.length !== 1 || scale.shape[0] !== c) throw new ShapeError(`scale ${formatShape(scale.shape)} must have shape [${c}] (the channels, dim 1, of ${formatShape(x.shape)})`);
    if (batchNormCount(x.shape) <= 1) throw new ShapeError(`training needs more than one value per channel, x ${formatShape(x.shape)} has ${batchNormCount(x.shape)}`);
    if (types.length === 4) throw new ShapeError('mean needs inv_std too: give both statistics or neither');
    for (const [i, name] of [[3, 'mean'], [4, 'inv_std']] as const) {
      const t = types[i];
      if (t && (t.dtype !== x.dtype || t.shape.length !== 1 || t.shape[0] !== c)) throw new ShapeError(`${name} ${dtypeShortName(t.dtype)}${formatShape(t.shape)} must be ${dtypeShortName(x.dtype)}[${c}] (the channels, dim 1, of ${formatShape(x.shape)})`);
    }
    return [{ dtype: x.dtype, shape: [...x.shape] }, { dtype: x.dtype, shape: [c] }, { dtype: x.dtype, shape: [c] }];
  },
  kernel: ([g, x, scale, givenMean, givenInvStd], attrs) => {
    const eps = attrs['epsilon'] as number;
    const [N, C] = x!.shape as [number, number];
    const S = numElements(x!.shape.slice(2));
    const count = N * S;
    const xd = x!.data;
    const gd = g!.data;
    const dx = new Float64Array(xd.length);
    const dscale = new Float64Array(C);
    const dbias = new Float64Array(C);
    const at = (n: number, c: number, i: number) => (n * C + c) * S + i;
    const statistics = (c: number): [number, number] => {
      if (givenMean && givenInvStd) return [givenMean.data[c]!, givenInvStd.data[c]!];
      const m = channelMoments(xd, N, C, S, c);
      return [m.mean, 1 / Math.sqrt(m.squares / count + eps)];
    };
    for (let c = 0; c < C; c++) {
      const [mu, rstd] = statistics(c);
      let sumG = 0;
      let sumGx = 0;
      for (let n = 0; n < N; n++) {
        for (let i = 0; i < S; i++) {
          const k = at(n, c, i);
          sumG += gd[k]!;
          sumGx += gd[k]! * (xd[k]! - mu) * rstd;
        }
      }
      const sc = scale!.data[c]!;
      const meanGh = (sumG * sc) / count;
      const meanGhx = (sumGx * sc) / count;
      for (let n = 0; n < N; n++) {
        for (let i = 0; i < S; i++) {
          const k = at(n, c, i);
          const xhat = (xd[k]! - mu) * rstd;
          dx[k] = (gd[k]! * sc - meanGh - xhat * meanGhx) * rstd;
        }
      }
      dscale[c] = sumGx;
      dbias[c] = sumG;
    }
    return [fromValues(x!.dtype, x!.shape, dx), fromValues(x!.dtype, [C], dscale), fromValues(x!.dtype, [C], dbias)];
  },
  grad: ({ b, op, inputs, outputGrads }) => {
    // the statistics, when given, are functions of x the op cannot see: only the three-operand form differentiates
    if (inputs.length > 3) {
      throw new DiagnosticError(
        error('batch_norm_grad: cannot differentiate the form with given statistics (the decompose pass makes it)', op.loc, ['differentiate the graph before decomposing it']),
      );
    }
    return batchNormGradGrad(b, op.attrs['epsilon'] as number, inputs as [Value, Value, Value], outputGrads);
  },
  saves: { operands: [0, 1, 2] },
});

// ---- layer_norm ----

/** scale/bias must broadcast (unidirectionally) to the normalised dims. */
function checkAffine(name: string, s: Shape, norm: Shape, x: Shape, axis: number): void {
  const ok = s.length <= norm.length && s.every((d, i) => d === 1 || d === norm[norm.length - s.length + i]);
  if (!ok) {
    throw new ShapeError(
      `${name} ${formatShape(s)} does not broadcast to the normalised dims ${formatShape(norm)} of ${formatShape(x)} (axis ${axis})`,
    );
  }
}

/** Offsets into a tensor of shape `s` for each position of `norm` (row-major). */
function broadcastIndex(s: Shape, norm: Shape): Int32Array {
  const n = numElements(norm);
  const idx = new Int32Array(n);
  const bs = broadcastStrides(s, norm);
  const ns = stridesOf(norm);
  for (let i = 0; i < n; i++) {
    let off = 0;
    for (let d = 0; d < norm.length; d++) off += Math.floor(i / ns[d]!) % norm[d]! * bs[d]!;
    idx[i] = off;
  }
  return idx;
}

/** Normalises each of `groups` contiguous runs of `size` values; `affine(k, j)` maps element j of run k. */
function normalizeRuns(xd: ArrayLike<number>, groups: number, size: number, eps: number, affine: (run: number, j: number, v: number) => number): Float64Array {
  const y = new Float64Array(groups * size);
  for (let g = 0; g < groups; g++) {
    const base = g * size;
    let s = 0;
    for (let j = 0; j < size; j++) s += xd[base + j]!;
    const mu = s / size;
    let q = 0;
    for (let j = 0; j < size; j++) {
      const d = xd[base + j]! - mu;
      q += d * d;
    }
    const inv = 1 / Math.sqrt(q / size + eps);
    for (let j = 0; j < size; j++) y[base + j] = affine(g, j, (xd[base + j]! - mu) * inv);
  }
  return y;
}

export const layer_norm = defineOp({
  name: 'layer_norm',
  family: 'norm',
  doc: 'Layer normalisation over dims axis..rank-1 (ONNX LayerNormalization), then optional scale and bias broadcast over those dims.',
  operands: [{ name: 'x' }, { name: 'scale', optional: true }, { name: 'bias', optional: true }],
  attrs: {
    axis: { type: 'int', default: -1 },
    epsilon: { type: 'float', default: 1e-5 },
  },
  infer: (types, attrs) => {
    checkFloatOperands('layer_norm', types);
    checkEpsilon(attrs);
    const x = types[0]!;
    if (x.shape.length === 0) throw new ShapeError('input must have rank 1 or more, got []');
    const axis = normalizeAxis(attrs['axis'] as number, x.shape.length);
    const norm = x.shape.slice(axis);
    if (types[1]) checkAffine('scale', types[1].shape, norm, x.shape, attrs['axis'] as number);
    if (types[2]) checkAffine('bias', types[2].shape, norm, x.shape, attrs['axis'] as number);
    return [{ dtype: x.dtype, shape: [...x.shape] }];
  },
  kernel: ([x, scale, bias], attrs) => {
    const axis = normalizeAxis(attrs['axis'] as number, x!.shape.length);
    const norm = x!.shape.slice(axis);
    const size = numElements(norm);
    const groups = size === 0 ? 0 : x!.size / size;
    const si = scale && !shapesEqual(scale.shape, norm) ? broadcastIndex(scale.shape, norm) : undefined;
    const bi = bias && !shapesEqual(bias.shape, norm) ? broadcastIndex(bias.shape, norm) : undefined;
    const y = normalizeRuns(x!.data, groups, size, attrs['epsilon'] as number, (_g, j, v) => {
      const a = scale ? scale.data[si ? si[j]! : j]! : 1;
      const b = bias ? bias.data[bi ? bi[j]! : j]! : 0;
      return v * a + b;
    });
    return [fromValues(x!.dtype, x!.shape, y)];
  },
  grad: ({ b, op, inputs, outputGrads }) => {
    const g = outputGrads[0];
    if (!g) return inputs.map(() => undefined);
    const [x, scale, bias] = inputs as [Value, Value | undefined, Value | undefined];
    const rank = x.type.shape.length;
    const axis = normalizeAxis(op.attrs['axis'] as number, rank);
    const axes = Array.from({ length: rank - axis }, (_, i) => axis + i);
    const { xhat, rstd } = normalizeStats(b, x, axes, op.attrs['epsilon'] as number);
    const gh = scale ? b.op('mul', [g, scale]) : g;
    return [
      normalizeBackward(b, gh, xhat, rstd, axes),
      ...(scale ? [sumToShape(b, b.op('mul', [g, xhat]), scale.type.shape)] : []),
      ...(bias ? [sumToShape(b, g, bias.type.shape)] : []),
    ];
  },
  saves: { operands: [0, 1] },
});

// ---- group_norm ----

export const group_norm = defineOp({
  name: 'group_norm',
  family: 'norm',
  doc: 'Group normalisation of x[N,C,...]: statistics over each group of C/num_groups channels and all spatial dims, then per-channel scale and bias (ONNX GroupNormalization-21).',
  operands: [{ name: 'x' }, { name: 'scale' }, { name: 'bias' }],
  attrs: {
    num_groups: { type: 'int' },
    epsilon: { type: 'float', default: 1e-5 },
  },
  infer: (types, attrs) => {
    checkFloatOperands('group_norm', types);
    checkEpsilon(attrs);
    const x = types[0]!;
    if (x.shape.length < 2) throw new ShapeError(`input must have rank 2 or more [N,C,...], got ${formatShape(x.shape)}`);
    const c = x.shape[1]!;
    const g = attrs['num_groups'] as number;
    if (g < 1 || c % g !== 0) throw new ShapeError(`num_groups ${g} does not divide the ${c} channels of ${formatShape(x.shape)}`);
    checkChannelVectors('group_norm', types, c);
    return [{ dtype: x.dtype, shape: [...x.shape] }];
  },
  kernel: ([x, scale, bias], attrs) => {
    const G = attrs['num_groups'] as number;
    const [N, C] = x!.shape as [number, number];
    const S = numElements(x!.shape.slice(2));
    const perGroup = C / G;
    const size = perGroup * S;
    // runs are contiguous: group g of sample n covers channels g*perGroup.. of that sample
    const y = normalizeRuns(x!.data, N * G, size, attrs['epsilon'] as number, (run, j, v) => {
      const c = (run % G) * perGroup + Math.floor(j / S);
      return v * scale!.data[c]! + bias!.data[c]!;
    });
    return [fromValues(x!.dtype, x!.shape, y)];
  },
  // statistics per (sample, group): normalise x viewed as [N, G, C/G·spatial] over its last axis
  grad: ({ b, op, inputs, outputGrads }) => {
    const g = outputGrads[0];
    if (!g) return inputs.map(() => undefined);
    const [x, scale] = inputs as [Value, Value, Value];
    const shape = x.type.shape;
    const rank = shape.length;
    const G = op.attrs['num_groups'] as number;
    const runs = [shape[0]!, G, (shape[1]! / G) * numElements(shape.slice(2))];
    const { xhat, rstd } = normalizeStats(b, b.op('reshape', [x], { shape: runs }), [2], op.attrs['epsilon'] as number);
    const gh = b.op('reshape', [b.op('mul', [g, channelView(b, scale, rank)])], { shape: runs });
    const dx = b.op('reshape', [normalizeBackward(b, gh, xhat, rstd, [2])], { shape: [...shape] });
    const axes = nonChannelAxes(rank);
    const xhatFull = b.op('reshape', [xhat], { shape: [...shape] });
    return [dx, b.op('reduce_sum', [b.op('mul', [g, xhatFull])], { axes }), b.op('reduce_sum', [g], { axes })];
  },
  saves: { operands: [0, 1] },
});

export const NORM_OPS: OpDef[] = [batch_norm, batch_norm_stats, batch_norm_grad, layer_norm, group_norm];
