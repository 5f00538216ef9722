import { Attrs, Graph, GraphBuilder, Op, Tensor, Value, mapLoopBodies, rewriteGraph } from '@tilegraph/ir';
import { definePass } from './pass.js';

/**
 * Rewrites composite ops into primitive ones the code generator lowers directly: softmax and
 * log_softmax, the normalisations, global average pooling, the classification losses and
 * identity_loss. Each rule computes what the op's reference kernel computes (up to the
 * rounding of the intermediate steps); the pass's tests compare both through the interpreter.
 * Run it after autograd (which needs identity_loss to find the loss).
 */

/** The batch statistics the decomposition of training-mode batch norms made: per input value, per epsilon. */
type BatchStatistics = Map<Value, Map<number, [Value, Value]>>;

type Rule = (b: GraphBuilder, op: Op, x: readonly Value[], stats: BatchStatistics) => Value[];

const scalar = (b: GraphBuilder, like: Value, v: number) => b.constant(Tensor.scalar(like.type.dtype, v));
const norm = (axis: number, rank: number) => (axis < 0 ? axis + rank : axis);

/** x - max(x) along `axis`, its exp, and the sum of that (one exp op: softmax divides the same values). */
function softmaxParts(b: GraphBuilder, x: Value, axis: number): { shifted: Value; exp: Value; sum: Value } {
  const m = b.op('reduce_max', [x], { axes: [axis], keepdims: true });
  const shifted = b.op('sub', [x, m]);
  const exp = b.op('exp', [shifted]);
  const sum = b.op('reduce_sum', [exp], { axes: [axis], keepdims: true });
  return { shifted, exp, sum };
}

/** mean and biased variance over `axes` (kept), and x normalised by them. */
function normalise(b: GraphBuilder, x: Value, axes: number[], eps: number): { y: Value; mean: Value; variance: Value } {
  const mean = b.op('reduce_mean', [x], { axes, keepdims: true });
  const d = b.op('sub', [x, mean]);
  const variance = b.op('reduce_mean', [b.op('mul', [d, d])], { axes, keepdims: true });
  const y = b.op('div', [d, b.op('sqrt', [b.op('add', [variance, scalar(b, x, eps)])])]);
  return { y, mean, variance };
}

/** Values per channel of x[N, C, ...]: the product of every dim but 1. */
const perChannel = (shape: readonly number[]) => shape.reduce((a, d, i) => (i === 1 ? a : a * d), 1);

/** A per-channel vector [C] viewed as [C, 1, ...] against an input of rank `rank` (channel dim 1). */
function channelView(b: GraphBuilder, v: Value, rank: number): Value {
  const c = v.type.shape[0]!;
  return b.op('reshape', [v], { shape: [c, ...Array(Math.max(rank - 2, 0)).fill(1)] });
}

function nll(b: GraphBuilder, logp: Value, target: Value, weight: Value | undefined, attrs: Attrs): Value {
  const shape = logp.type.shape;
  const rank = shape.length;
  const classAxis = rank === 1 ? 0 : 1;
  const C = shape[classAxis]!;
  const reduction = attrs['reduction'] as string;
  const ignore = attrs['ignore_index'] as number | undefined;
  const eps = (attrs['label_smoothing'] as number | undefined) ?? 0;
  const classView = rank === 1 ? [C] : [1, C, ...shape.slice(2).map(() => 1)];
  const classes = b.constant(Tensor.from('int32', classView, Array.from({ length: C }, (_, i) => i)));
  const t = b.op('unsqueeze', [target], { axes: [classAxis] });
  const f = (m: Value) => b.op('cast', [m], { to: logp.type.dtype });
  let hits = f(b.op('equal', [t, classes]));
  let valid: Value | undefined;
  if (ignore !== undefined) {
    valid = f(b.op('not', [b.op('equal', [t, b.scalar('int32', ignore)])]));
    hits = b.op('mul', [hits, valid]);
  }
  const w = weight ? b.op('reshape', [weight], { shape: classView }) : undefined;
  const weighted = w ? b.op('mul', [hits, w]) : hits; // valid·w[t]·[c = t]
  let coef = weighted;
  if (eps !== 0) {
    let smooth = w ? b.op('mul', [w, scalar(b, logp, eps / C)]) : scalar(b, logp, eps / C);
    if (valid) smooth = b.op('mul', [smooth, valid]);
    coef = b.op('add', [b.op('mul', [weighted, scalar(b, logp, 1 - eps)]), smooth]);
  }
  // per-sample loss: -Σ_c coef·logp
  const per = b.op('neg', [b.op('reduce_sum', [b.op('mul', [coef, logp])], { axes: [classAxis], keepdims: false })]);
  if (reduction === 'none') return per;
  const total = b.op('reduce_sum', [per], { axes: [], keepdims: false });
  if (reduction === 'sum') return total;
  return b.op('div', [total, b.op('reduce_sum', [weighted], { axes: [], keepdims: false })]);
}

export const DECOMPOSE_RULES: Readonly<Record<string, Rule>> = {
  softmax: (b, op, [x]) => {
    const { exp, sum } = softmaxParts(b, x!, op.attrs['axis'] as number);
    return [b.op('div', [exp, sum])];
  },
  log_softmax: (b, op, [x]) => {
    const { shifted, sum } = softmaxParts(b, x!, op.attrs['axis'] as number);
    return [b.op('sub', [shifted, b.op('log', [sum])])];
  },
  layer_norm: (b, op, [x, scale, bias]) => {
    const rank = x!.type.shape.length;
    const axis = norm(op.attrs['axis'] as number, rank);
    const axes = Array.from({ length: rank - axis }, (_, i) => axis + i);
    let { y } = normalise(b, x!, axes, op.attrs['epsilon'] as number);
    if (scale) y = b.op('mul', [y, scale]);
    if (bias) y = b.op('add', [y, bias]);
    return [y];
  },
  group_norm: (b, op, [x, scale, bias]) => {
    const shape = x!.type.shape;
    const n = shape[0]!;
    const g = op.attrs['num_groups'] as number;
    const grouped = b.op('reshape', [x!], { shape: [n, g, -1] });
    const { y } = normalise(b, grouped, [2], op.attrs['epsilon'] as number);
    let out = b.op('reshape', [y], { shape: [...shape] });
    out = b.op('add', [b.op('mul', [out, channelView(b, scale!, shape.length)]), channelView(b, bias!, shape.length)]);
    return [out];
  },
  batch_norm: (b, op, [x, scale, bias, mean, variance], stats) => {
    const shape = x!.type.shape;
    const rank = shape.length;
    const eps = op.attrs['epsilon'] as number;
    const cv = (v: Value) => channelView(b, v, rank);
    // as the reference kernel: a = scale / sqrt(var + epsilon) per channel, then (x - mean)·a + bias,
    // no division per element
    const normalised = (m: Value, a: Value) => b.op('add', [b.op('mul', [b.op('sub', [x!, cv(m)]), cv(a)]), cv(bias!)]);
    if (!op.attrs['training']) return [normalised(mean!, b.op('div', [scale!, b.op('sqrt', [b.op('add', [variance!, scalar(b, x!, eps)])])]))];
    // the statistics in one op (PopLibs' batchNormStatistics, two passes over x), whose
    // 1/sqrt(var + epsilon) gives back the variance the running statistics need (never below 0;
    // with epsilon > 0 the library divides by no zero, which an IPU trapping on it would stop at)
    const [batchMean, invStd] = b.ops('batch_norm_stats', [x!], { epsilon: eps }) as [Value, Value];
    if (!stats.has(x!)) stats.set(x!, new Map());
    stats.get(x!)!.set(eps, [batchMean, invStd]);
    const batchVariance = b.op('max', [b.op('sub', [b.op('reciprocal', [b.op('mul', [invStd, invStd])]), scalar(b, x!, eps)]), scalar(b, x!, 0)]);
    const count = perChannel(shape);
    const mom = op.attrs['momentum'] as number;
    // the running variance takes the unbiased batch variance (torch), or the biased one (ONNX)
    const batchVar = op.attrs['unbiased_running_var'] ? b.op('mul', [batchVariance, scalar(b, x!, count / (count - 1))]) : batchVariance;
    const ema = (run: Value, batch: Value) => b.op('add', [b.op('mul', [run, scalar(b, x!, mom)]), b.op('mul', [batch, scalar(b, x!, 1 - mom)])]);
    return [normalised(batchMean, b.op('mul', [scale!, invStd])), ema(mean!, batchMean), ema(variance!, batchVar)];
  },
  global_avg_pool: (b, _op, [x]) => {
    const rank = x!.type.shape.length;
    return [b.op('reduce_mean', [x!], { axes: Array.from({ length: rank - 2 }, (_, i) => i + 2), keepdims: true })];
  },
  nll_loss: (b, op, [logp, target, weight]) => [nll(b, logp!, target!, weight, op.attrs)],
  cross_entropy: (b, op, [logits, target, weight]) => {
    const rank = logits!.type.shape.length;
    const { shifted, sum } = softmaxParts(b, logits!, rank === 1 ? 0 : 1);
    const logp = b.op('sub', [shifted, b.op('log', [sum])]);
    return [nll(b, logp, target!, weight, op.attrs)];
  },
  identity_loss: (b, op, [x]) => {
    const r = op.attrs['reduction'] as string;
    if (r === 'none') return [b.op('identity', [x!])];
    return [b.op(r === 'sum' ? 'reduce_sum' : 'reduce_mean', [x!], { axes: [], keepdims: false })];
  },
};

/** The op kinds the decompose pass removes. */
export const DECOMPOSED_OPS: readonly string[] = Object.keys(DECOMPOSE_RULES);

/**
 * batch_norm_grad with the forward's statistics: the op gives the channel sums dscale = Σ g·x̂
 * and dbias = Σ g (one pass over g and x), and dx is element-wise ops on them, as the reference
 * kernel computes it: dx = (g·s - Σg·s/M - x̂·Σg·x̂·s/M)·r with x̂ = (x - mean)·r, r = inv_std,
 * M the values per channel. The op's own dx is then unused, so the code generator asks the
 * library for the sums only, and dx fuses into one pass over g and x: two passes, not three.
 */
function batchNormGradWithStatistics(b: GraphBuilder, op: Op, [g, x, scale]: readonly Value[], [mean, invStd]: readonly [Value, Value]): Value[] {
  const [, dscale, dbias] = b.ops('batch_norm_grad', [g!, x!, scale!, mean, invStd], op.attrs) as [Value, Value, Value];
  const shape = x!.type.shape;
  const rank = shape.length;
  const count = perChannel(shape);
  const cv = (v: Value) => channelView(b, v, rank);
  const perValue = (sum: Value) => cv(b.op('div', [b.op('mul', [sum, scale!]), scalar(b, x!, count)]));
  const r = cv(invStd);
  const xhat = b.op('mul', [b.op('sub', [x!, cv(mean)]), r]);
  const centred = b.op('sub', [b.op('mul', [g!, cv(scale!)]), perValue(dbias)]);
  const dx = b.op('mul', [b.op('sub', [centred, b.op('mul', [xhat, perValue(dscale)])]), r]);
  return [dx, dscale, dbias];
}

export function decomposeGraph(g: Graph): Graph {
  const stats: BatchStatistics = new Map();
  return mapLoopBodies(
    rewriteGraph(g, (op, operands, b) => {
      // a batch norm's gradient reads the statistics its forward made (of the same value, with the
      // same epsilon, earlier in this graph) rather than computing them again
      if (op.kind === 'batch_norm_grad' && operands.length === 3) {
        const s = stats.get(operands[1]!)?.get(op.attrs['epsilon'] as number);
        return s ? batchNormGradWithStatistics(b, op, operands, s) : undefined;
      }
      return DECOMPOSE_RULES[op.kind]?.(b, op, operands, stats);
    }).graph,
    decomposeGraph,
  );
}

export const decomposePass = definePass('decompose', 'rewrite composite ops (softmax, norms, losses, ...) into primitives', (g) => decomposeGraph(g));
