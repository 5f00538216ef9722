import type { GraphBuilder } from '../builder.js';
import type { Value } from '../graph.js';
import { Shape, shapesEqual } from '../shape.js';
import { Tensor } from '../tensor.js';

/** Building blocks for gradient rules (rules live with the op definitions). */

/**
 * Sums a gradient of a broadcast result back to the shape of the operand that was broadcast:
 * leading dims are summed away, dims that were 1 are summed with keepdims.
 */
export function sumToShape(b: GraphBuilder, g: Value, shape: Shape): Value {
  const gs = g.type.shape;
  if (shapesEqual(gs, shape)) return g;
  const lead = gs.length - shape.length;
  const axes: number[] = [];
  for (let i = 0; i < gs.length; i++) {
    if (i < lead) axes.push(i);
    else if (shape[i - lead] === 1 && gs[i] !== 1) axes.push(i);
  }
  const summed = axes.length ? b.op('reduce_sum', [g], { axes, keepdims: true }) : g;
  return shapesEqual(summed.type.shape, shape) ? summed : b.op('reshape', [summed], { shape: [...shape] });
}

/** A scalar constant with the dtype of `like`. */
export function scalarLike(b: GraphBuilder, like: Value, x: number): Value {
  return b.constant(Tensor.scalar(like.type.dtype, x));
}

/** `g * x` then summed back to `shape` — the common tail of product-rule gradients. */
export function mulSum(b: GraphBuilder, g: Value, x: Value, shape: Shape): Value {
  return sumToShape(b, b.op('mul', [g, x]), shape);
}

/** Zeros of `shape` in the dtype of `like`: a broadcast scalar rather than a stored constant. */
export function zerosShaped(b: GraphBuilder, like: Value, shape: Shape): Value {
  const z = scalarLike(b, like, 0);
  return shape.length === 0 ? z : b.op('expand', [z], { shape: [...shape] });
}

/**
 * A reduction's result (or its gradient) with the reduced axes put back as size-1 dims, so that it
 * broadcasts against the operand. `axes` are normalised operand axes.
 */
export function restoreReducedAxes(b: GraphBuilder, v: Value, axes: readonly number[], keepdims: boolean): Value {
  if (keepdims || axes.length === 0) return v;
  return b.op('unsqueeze', [v], { axes: [...axes] });
}

/** `v` broadcast to `shape` (no op when it already has it). */
export function broadcastToShape(b: GraphBuilder, v: Value, shape: Shape): Value {
  return shapesEqual(v.type.shape, shape) ? v : b.op('expand', [v], { shape: [...shape] });
}

/** Elements [start, end) of one axis. */
export function sliceAxis(b: GraphBuilder, v: Value, axis: number, start: number, end: number): Value {
  return b.op('slice', [v], { starts: [start], ends: [end], axes: [axis] });
}

/** One axis in reverse order. */
export function reverseAxis(b: GraphBuilder, v: Value, axis: number): Value {
  const dim = v.type.shape[axis]!;
  // start at the last element and run past index 0 (ONNX clamps the end to -1 for negative steps)
  return b.op('slice', [v], { starts: [-1], ends: [-dim - 1], axes: [axis], steps: [-1] });
}

/** Zeros added before and after one axis (constant pad). */
export function padAxis(b: GraphBuilder, v: Value, axis: number, before: number, after: number): Value {
  if (before === 0 && after === 0) return v;
  const rank = v.type.shape.length;
  const pads = new Array<number>(2 * rank).fill(0);
  pads[axis] = before;
  pads[axis + rank] = after;
  return b.op('pad', [v], { pads });
}

/** The sum of one or more values of the same type. */
export function addAll(b: GraphBuilder, vs: readonly Value[]): Value {
  let acc = vs[0]!;
  for (let i = 1; i < vs.length; i++) acc = b.op('add', [acc, vs[i]!]);
  return acc;
}

/** A tensor of zeros shaped and typed like `like` (a broadcast scalar, so no large constant). */
export function zerosLike(b: GraphBuilder, like: Value): Value {
  const z = scalarLike(b, like, 0);
  return like.type.shape.length === 0 ? z : b.op('expand', [z], { shape: [...like.type.shape] });
}

/** A bool mask as 0/1 values of `like`'s dtype. */
export function maskLike(b: GraphBuilder, mask: Value, like: Value): Value {
  return b.op('cast', [mask], { to: like.type.dtype });
}

/** Swaps the last two dims (rank ≥ 2). */
export function transposeLast2(b: GraphBuilder, x: Value): Value {
  const r = x.type.shape.length;
  const perm = Array.from({ length: r }, (_, i) => i);
  perm[r - 2] = r - 1;
  perm[r - 1] = r - 2;
  return b.op('transpose', [x], { perm });
}

/** Reshapes unless the shape is already `shape`. */
export function reshapeTo(b: GraphBuilder, x: Value, shape: Shape): Value {
  return shapesEqual(x.type.shape, shape) ? x : b.op('reshape', [x], { shape: [...shape] });
}

/**
 * Pads each dim with zeros by begins[d] / ends[d] elements; negative amounts crop instead
 * (done with slice so that `pad` only ever adds).
 */
export function padOrCrop(b: GraphBuilder, x: Value, begins: readonly number[], ends: readonly number[]): Value {
  const shape = x.type.shape;
  const r = shape.length;
  let v = x;
  if (begins.some((p) => p < 0) || ends.some((p) => p < 0)) {
    const axes: number[] = [];
    const starts: number[] = [];
    const stops: number[] = [];
    for (let d = 0; d < r; d++) {
      if (begins[d]! >= 0 && ends[d]! >= 0) continue;
      axes.push(d);
      const start = Math.max(0, -begins[d]!);
      starts.push(start);
      // never below start: a negative stop would count from the end
      stops.push(Math.max(start, shape[d]! - Math.max(0, -ends[d]!)));
    }
    v = b.op('slice', [v], { starts, ends: stops, axes });
  }
  const pb = begins.map((p) => Math.max(0, p));
  const pe = ends.map((p) => Math.max(0, p));
  if (pb.some((p) => p > 0) || pe.some((p) => p > 0)) v = b.op('pad', [v], { pads: [...pb, ...pe] });
  return v;
}

/**
 * Backward of a normalisation x̂ = (x - mean)·rstd over `axes` (statistics with keepdims):
 * dx = rstd · (g - mean(g) - x̂ · mean(g·x̂)), all means over `axes`.
 */
export function normalizeBackward(b: GraphBuilder, g: Value, xhat: Value, rstd: Value, axes: readonly number[]): Value {
  const mean = (v: Value) => b.op('reduce_mean', [v], { axes: [...axes], keepdims: true });
  const centred = b.op('sub', [g, mean(g)]);
  const proj = b.op('mul', [xhat, mean(b.op('mul', [g, xhat]))]);
  return b.op('mul', [b.op('sub', [centred, proj]), rstd]);
}

/**
 * Statistics of a normalisation over `axes` (biased variance, as the forward kernels): returns
 * x̂ = (x - mean)·rstd and rstd = 1/sqrt(var + epsilon), both keeping the reduced dims.
 */
export function normalizeStats(b: GraphBuilder, x: Value, axes: readonly number[], epsilon: number): { xhat: Value; rstd: Value } {
  const mean = b.op('reduce_mean', [x], { axes: [...axes], keepdims: true });
  const d = b.op('sub', [x, mean]);
  const variance = b.op('reduce_mean', [b.op('mul', [d, d])], { axes: [...axes], keepdims: true });
  const rstd = b.op('reciprocal', [b.op('sqrt', [b.op('add', [variance, scalarLike(b, x, epsilon)])])]);
  return { xhat: b.op('mul', [d, rstd]), rstd };
}
