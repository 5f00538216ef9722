// Which sums of squares the code generator reduces as popops SQUARE_ADD (shared by the
// reductions and the fusion of element-wise ops, which then leaves the squares unwritten).
import { Op, Value, normalizeAxis, numElements } from '@tilegraph/ir';

/**
 * The x of a float32 value v = mul(x, x) whose one use is a sum or mean over some elements, on the
 * same IPU (`sameIpu`): that reduction is lowered as popops::reduce SQUARE_ADD of x, so the squares
 * are never written out (batch and layer norms' variances read one tensor less). Each square is
 * still rounded to float32 and summed in the same order, so the bits do not change.
 */
export function absorbedSquare(v: Value, sameIpu: (a: Op, b: Op) => boolean): Value | undefined {
  const sq = v.producer;
  if (sq.kind !== 'mul' || sq.operands.length !== 2 || sq.operands[0] !== sq.operands[1] || v.type.dtype !== 'float32') return undefined;
  const x = sq.operands[0]!;
  if (x.type.dtype !== 'float32' || v.uses.length !== 1) return undefined;
  const r = v.uses[0]!.op;
  if ((r.kind !== 'reduce_sum' && r.kind !== 'reduce_mean') || r.operands[0] !== v || !sameIpu(sq, r)) return undefined;
  const shape = v.type.shape;
  const axes = resolveAxes(r.attrs['axes'] as number[], shape.length);
  if (axes.length === 0 || axes.some((a) => shape[a] === 0) || numElements(r.result.type.shape) === 0) return undefined;
  return x;
}

/** Reduced axes, normalised, sorted and without repeats; none given means all. */
export function resolveAxes(axes: readonly number[], rank: number): number[] {
  if (rank === 0) return [];
  if (axes.length === 0) return Array.from({ length: rank }, (_, i) => i);
  return [...new Set(axes.map((a) => normalizeAxis(a, rank)))].sort((a, b) => a - b);
}
