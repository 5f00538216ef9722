import { Op, Value, numElements } from '@tilegraph/ir';
import type { GraphEmitter } from '../context.js';
import type { Lowering } from './index.js';
import { checkPoplinTypes } from './preconditions.js';
import { elementLiteral } from '../types.js';

/**
 * batch_norm_grad → popnn::bn, as PopART grows its BatchNormGradOp: the batch statistics (the
 * forward's when given, else batchNormStatistics again), the input gradient through them
 * (batchNormGradients, unless nothing reads it) and the scale's and bias's
 * (batchNormParamGradients), from the activations as they are. The forward training-mode
 * batch_norm is decomposed into batch_norm_stats and element-wise ops, which fuse with the ops
 * around it.
 */
/**
 * `const auto bnStatsN = popnn::bn::batchNormStatistics(...)` of operand `acts` with the op's
 * epsilon (biased variance, two-pass); returns the local's name (.first mean, .second invStdDev).
 */
function emitStatistics(op: Op, acts: number, e: GraphEmitter, label: string): string {
  const stats = e.local('bnStats');
  e.emit(`const auto ${stats} = popnn::bn::batchNormStatistics(${e.g(e.ipuOf(op))}, ${e.operand(op, acts)}, ${elementLiteral('float32', op.attrs['epsilon'] as number)}, prog, false, true, poplar::FLOAT, ${e.debugName(label)});`);
  return stats;
}

/** Whether batch_norm_grad's dx is read (by an op or as an output of the graph). */
function dxNeeded(dx: Value, e: GraphEmitter): boolean {
  return dx.uses.length > 0 || e.graph.outputs.some((o) => o.value === dx);
}

function lowerBatchNormGrad(op: Op, e: GraphEmitter): void {
  const acts = op.operands[1]!;
  const [dx, dscale, dbias] = op.results as [Value, Value, Value];
  const ipu = e.ipuOf(op);
  const g = e.g(ipu);
  if (numElements(acts.type.shape) === 0 || acts.type.shape[1] === 0) {
    for (const r of op.results) e.newResult(r, ipu);
    return;
  }
  checkPoplinTypes(e, 'popnn::bn::batchNormGradients', [acts.type.dtype]);
  const C = acts.type.shape[1]!;
  const label = e.valueLabel(dx);
  const name = e.debugName(label);
  // the forward's statistics when the decompose pass passed them on, else made again here
  let mean: string, invStd: string;
  if (op.operands.length === 5) {
    mean = e.operand(op, 3);
    invStd = e.operand(op, 4);
  } else {
    const stats = emitStatistics(op, 1, e, label);
    e.countTemporary('float32', [C], ipu, `${label}/mean`);
    e.countTemporary('float32', [C], ipu, `${label}/invStdDev`);
    mean = `${stats}.first`;
    invStd = `${stats}.second`;
  }
  // dx unused: the decompose pass computes it from the sums, in element-wise ops
  if (dxNeeded(dx, e)) {
    e.countResult(dx.type.dtype, dx.type.shape, ipu, label);
    e.define(dx, `popnn::bn::batchNormGradients(${g}, ${e.operand(op, 1)}, ${e.operand(op, 0)}, ${mean}, ${invStd}, ${e.operand(op, 2)}, prog, poplar::FLOAT, ${name})`, ipu, new Set(), true);
  }
  const deltas = e.local('bnDeltas');
  e.emit(`const auto ${deltas} = popnn::bn::batchNormParamGradients(${g}, ${e.operand(op, 1)}, ${e.operand(op, 0)}, ${mean}, ${invStd}, prog, poplar::FLOAT, ${e.debugName(e.valueLabel(dscale))});`);
  e.countResult(dscale.type.dtype, dscale.type.shape, ipu, e.valueLabel(dscale));
  e.define(dscale, `${deltas}.first`, ipu, new Set(), true);
  e.countResult(dbias.type.dtype, dbias.type.shape, ipu, e.valueLabel(dbias));
  e.define(dbias, `${deltas}.second`, ipu, new Set(), true);
}

/** batch_norm_stats → popnn::bn::batchNormStatistics (biased variance, two-pass): the mean and inverse standard deviation. */
function lowerBatchNormStats(op: Op, e: GraphEmitter): void {
  const x = op.operands[0]!;
  const [mean, invStd] = op.results as [Value, Value];
  const ipu = e.ipuOf(op);
  if (numElements(x.type.shape) === 0) {
    for (const r of op.results) e.newResult(r, ipu);
    return;
  }
  checkPoplinTypes(e, 'popnn::bn::batchNormStatistics', [x.type.dtype]);
  const label = e.valueLabel(mean);
  const stats = emitStatistics(op, 0, e, label);
  e.countResult(mean.type.dtype, mean.type.shape, ipu, label);
  e.define(mean, `${stats}.first`, ipu, new Set(), true);
  e.countResult(invStd.type.dtype, invStd.type.shape, ipu, e.valueLabel(invStd));
  e.define(invStd, `${stats}.second`, ipu, new Set(), true);
}

export const NORM_LOWERINGS: Record<string, Lowering> = { batch_norm_stats: lowerBatchNormStats, batch_norm_grad: lowerBatchNormGrad };
