import { Attrs } from '../attributes.js';
import { broadcastStrides, storeConverter } from '../kernels/elementwise.js';
import type { GraphBuilder } from '../builder.js';
import type { Value } from '../graph.js';
import { GradContext, OpDef, defineOp } from '../opdef.js';
import { Shape, ShapeError, TensorType, formatShape, formatType, numElements, stridesOf } from '../shape.js';
import { Tensor, allocData, castScalar } from '../tensor.js';
import { addAll, padAxis, reverseAxis, sliceAxis, sumToShape, zerosShaped } from './gradutil.js';

/**
 * Data movement: ops that only rearrange, select or repeat elements. Their kernels copy stored
 * values exactly, so they work for every dtype. Index conventions follow ONNX.
 */

function fmt(xs: readonly number[]): string {
  return `[${xs.join(',')}]`;
}

/** Normalises `axis` for a tensor of `shape`, naming the shape when it is out of range. */
function axisOf(axis: number, shape: Shape, what = 'axis', rank = shape.length): number {
  if (!Number.isInteger(axis) || axis < -rank || axis >= rank) {
    throw new ShapeError(`${what} ${axis} is out of range for ${formatShape(shape)} (rank ${shape.length})`);
  }
  return axis < 0 ? axis + rank : axis;
}

/** Normalised axes in the given order; throws when one is out of range or repeated. */
function uniqueAxes(axes: readonly number[], shape: Shape, rank = shape.length): number[] {
  const out = axes.map((a) => axisOf(a, shape, 'axis', rank));
  if (new Set(out).size !== out.length) throw new ShapeError(`axes ${fmt(axes)} repeat an axis`);
  return out;
}

function result(x: TensorType, shape: Shape): TensorType[] {
  return [{ dtype: x.dtype, shape: [...shape] }];
}

/**
 * Copies elements into a new tensor of `outShape`: element (i0, ..., ik) reads the input at flat
 * offset offs[0][i0] + ... + offs[k][ik], or takes `fill` when any of those entries is negative.
 */
function gatherOffsets(x: Tensor, outShape: Shape, offs: readonly ArrayLike<number>[], fill = 0): Tensor {
  const n = numElements(outShape);
  const out = allocData(x.dtype, n);
  const src = x.data;
  const fillValue = castScalar(x.dtype, fill);
  const rank = outShape.length;
  const idx = new Array<number>(rank).fill(0);
  for (let i = 0; i < n; i++) {
    let off = 0;
    let inside = true;
    for (let d = 0; d < rank; d++) {
      const o = offs[d]![idx[d]!]!;
      if (o < 0) {
        inside = false;
        break;
      }
      off += o;
    }
    out[i] = inside ? src[off]! : fillValue;
    for (let d = rank - 1; d >= 0; d--) {
      if (++idx[d]! < outShape[d]!) break;
      idx[d] = 0;
    }
  }
  return new Tensor(x.dtype, outShape, out);
}

function offsets(count: number, f: (i: number) => number): number[] {
  return Array.from({ length: count }, (_, i) => f(i));
}

/** Offsets reading each dimension of `outShape` at the same index of an input with strides `st`. */
function identityOffsets(outShape: Shape, st: readonly number[]): number[][] {
  return outShape.map((d, k) => offsets(d, (i) => i * st[k]!));
}

function sameData(x: Tensor, shape: Shape): Tensor {
  return new Tensor(x.dtype, shape, x.data.slice());
}

/** Gradient of ops that keep the elements in order and only change the shape. */
function reshapeBack(ctx: GradContext): (Value | undefined)[] {
  const g = ctx.outputGrads[0];
  if (!g) return [undefined];
  return [ctx.b.op('reshape', [g], { shape: [...ctx.inputs[0]!.type.shape] })];
}

// ---- reshape ----

/** The target shape with its -1 resolved; throws when it cannot hold the input's elements. */
export function resolveReshape(from: Shape, to: readonly number[]): number[] {
  const n = numElements(from);
  const holes = to.filter((d) => d === -1).length;
  if (holes > 1) throw new ShapeError(`shape ${fmt(to)} has more than one -1`);
  const bad = to.find((d) => d < -1);
  if (bad !== undefined) throw new ShapeError(`shape ${fmt(to)} has a negative dimension ${bad}`);
  if (holes === 0) {
    const m = numElements(to);
    if (m !== n) throw new ShapeError(`cannot reshape ${formatShape(from)} (${n} elements) to ${fmt(to)} (${m} elements)`);
    return [...to];
  }
  const known = to.reduce((p, d) => (d === -1 ? p : p * d), 1);
  if (known === 0 || n % known !== 0) {
    const why = known === 0 ? 'the other dimensions hold 0 elements, so -1 is undetermined' : `${n} is not a multiple of ${known}`;
    throw new ShapeError(`cannot reshape ${formatShape(from)} (${n} elements) to ${fmt(to)}: ${why}`);
  }
  return to.map((d) => (d === -1 ? n / known : d));
}

export const reshape = defineOp({
  name: 'reshape',
  family: 'movement',
  doc: 'same elements in a new shape (row-major); one dimension may be -1 and is inferred',
  operands: [{ name: 'x' }],
  attrs: { shape: { type: 'ints' } },
  infer: ([x], attrs) => result(x!, resolveReshape(x!.shape, attrs['shape'] as number[])),
  kernel: ([x], attrs) => [sameData(x!, resolveReshape(x!.shape, attrs['shape'] as number[]))],
  grad: reshapeBack,
  saves: {},
});

// ---- transpose ----

/** The permutation (default: reversed dims), checked to be one of 0..rank-1. */
export function resolvePerm(shape: Shape, perm: readonly number[] | undefined): number[] {
  const rank = shape.length;
  if (perm === undefined) return Array.from({ length: rank }, (_, i) => rank - 1 - i);
  const seen = new Set(perm);
  if (perm.length !== rank || seen.size !== rank || perm.some((p) => !Number.isInteger(p) || p < 0 || p >= rank)) {
    throw new ShapeError(`perm ${fmt(perm)} is not a permutation of 0..${rank - 1} for ${formatShape(shape)}`);
  }
  return [...perm];
}

export const transpose = defineOp({
  name: 'transpose',
  family: 'movement',
  doc: 'permutes dimensions: result dim i is input dim perm[i] (default: reversed)',
  operands: [{ name: 'x' }],
  attrs: { perm: { type: 'ints', optional: true } },
  infer: ([x], attrs) => {
    const perm = resolvePerm(x!.shape, attrs['perm'] as number[] | undefined);
    return result(x!, perm.map((p) => x!.shape[p]!));
  },
  kernel: ([x], attrs) => {
    const perm = resolvePerm(x!.shape, attrs['perm'] as number[] | undefined);
    const st = stridesOf(x!.shape);
    const outShape = perm.map((p) => x!.shape[p]!);
    return [gatherOffsets(x!, outShape, perm.map((p, d) => offsets(outShape[d]!, (i) => i * st[p]!)))];
  },
  grad: (ctx) => {
    const g = ctx.outputGrads[0];
    if (!g) return [undefined];
    const perm = resolvePerm(ctx.inputs[0]!.type.shape, ctx.op.attrs['perm'] as number[] | undefined);
    const inverse = new Array<number>(perm.length);
    perm.forEach((p, d) => (inverse[p] = d));
    return [ctx.b.op('transpose', [g], { perm: inverse })];
  },
  saves: {},
});

// ---- slice ----

export interface ResolvedSlice {
  readonly shape: number[];
  /** Per input dimension: first index read and the step between reads. */
  readonly begin: number[];
  readonly step: number[];
}

function clamp(x: number, lo: number, hi: number): number {
  return x < lo ? lo : x > hi ? hi : x;
}

/** ONNX Slice: negative indices count from the end, bounds clamp, negative steps walk backwards. */
export function resolveSlice(shape: Shape, attrs: Attrs): ResolvedSlice {
  const starts = attrs['starts'] as number[];
  const ends = attrs['ends'] as number[];
  const axes = (attrs['axes'] as number[] | undefined) ?? starts.map((_, i) => i);
  const steps = (attrs['steps'] as number[] | undefined) ?? starts.map(() => 1);
  if (ends.length !== starts.length || axes.length !== starts.length || steps.length !== starts.length) {
    throw new ShapeError(
      `starts ${fmt(starts)}, ends ${fmt(ends)}, axes ${fmt(axes)} and steps ${fmt(steps)} must have the same length`,
    );
  }
  const norm = uniqueAxes(axes, shape);
  const out = [...shape];
  const begin = shape.map(() => 0);
  const step = shape.map(() => 1);
  norm.forEach((a, k) => {
    const dim = shape[a]!;
    const s = steps[k]!;
    if (s === 0) throw new ShapeError(`steps ${fmt(steps)} contain 0`);
    let lo = starts[k]!;
    let hi = ends[k]!;
    if (lo < 0) lo += dim;
    if (hi < 0) hi += dim;
    let size: number;
    if (s > 0) {
      lo = clamp(lo, 0, dim);
      hi = clamp(hi, 0, dim);
      size = hi > lo ? Math.ceil((hi - lo) / s) : 0;
    } else {
      lo = clamp(lo, 0, dim - 1);
      hi = clamp(hi, -1, dim - 1);
      size = dim > 0 && lo > hi ? Math.ceil((lo - hi) / -s) : 0;
    }
    out[a] = size;
    begin[a] = size > 0 ? lo : 0;
    step[a] = s;
  });
  return { shape: out, begin, step };
}

export const slice = defineOp({
  name: 'slice',
  family: 'movement',
  doc: 'ONNX Slice: x[starts:ends:steps] on the given axes (negative indices, clamped bounds, negative steps)',
  operands: [{ name: 'x' }],
  attrs: {
    starts: { type: 'ints' },
    ends: { type: 'ints' },
    axes: { type: 'ints', optional: true, doc: 'default: 0..len(starts)-1' },
    steps: { type: 'ints', optional: true, doc: 'default: all 1' },
  },
  infer: ([x], attrs) => result(x!, resolveSlice(x!.shape, attrs).shape),
  kernel: ([x], attrs) => {
    const r = resolveSlice(x!.shape, attrs);
    const st = stridesOf(x!.shape);
    return [gatherOffsets(x!, r.shape, r.shape.map((n, d) => offsets(n, (i) => (r.begin[d]! + i * r.step[d]!) * st[d]!)))];
  },
  grad: (ctx) => {
    const g = ctx.outputGrads[0];
    if (!g) return [undefined];
    const shape = ctx.inputs[0]!.type.shape;
    const r = resolveSlice(shape, ctx.op.attrs);
    if (r.step.every((s) => s === 1)) {
      // a contiguous window: zeros around it
      const pads = [...r.begin, ...shape.map((d, i) => d - r.begin[i]! - r.shape[i]!)];
      return [ctx.b.op('pad', [g], { pads })];
    }
    return [ctx.b.op('slice_grad', [g], { ...sliceAttrs(ctx.op.attrs), shape: [...shape] })];
  },
  saves: {},
});

/** The slice attributes of an op's attribute record (absent optional ones left out). */
function sliceAttrs(attrs: Attrs): Record<string, number[]> {
  const out: Record<string, number[]> = { starts: [...(attrs['starts'] as number[])], ends: [...(attrs['ends'] as number[])] };
  if (attrs['axes'] !== undefined) out['axes'] = [...(attrs['axes'] as number[])];
  if (attrs['steps'] !== undefined) out['steps'] = [...(attrs['steps'] as number[])];
  return out;
}

function sliceGradShape(dy: TensorType, attrs: Attrs): ResolvedSlice {
  const shape = attrs['shape'] as number[];
  const bad = shape.find((d) => d < 0);
  if (bad !== undefined) throw new ShapeError(`shape ${fmt(shape)} has a negative dimension ${bad}`);
  const r = resolveSlice(shape, attrs);
  if (r.shape.length !== dy.shape.length || r.shape.some((d, i) => d !== dy.shape[i])) {
    throw new ShapeError(`slicing ${fmt(shape)} gives ${formatShape(r.shape)} but the operand is ${formatShape(dy.shape)}`);
  }
  return r;
}

/** The adjoint of slice: scatters dy back to where slice read it, zeros elsewhere. */
export const sliceGrad = defineOp({
  name: 'slice_grad',
  family: 'movement',
  doc: 'adjoint of slice: a tensor of `shape` that is zero except where slice(starts, ends, axes, steps) reads, which holds dy',
  operands: [{ name: 'dy' }],
  attrs: {
    shape: { type: 'ints', doc: 'shape of the sliced tensor' },
    starts: { type: 'ints' },
    ends: { type: 'ints' },
    axes: { type: 'ints', optional: true, doc: 'default: 0..len(starts)-1' },
    steps: { type: 'ints', optional: true, doc: 'default: all 1' },
  },
  infer: ([dy], attrs) => {
    sliceGradShape(dy!, attrs);
    return result(dy!, attrs['shape'] as number[]);
  },
  kernel: ([dy], attrs) => {
    const r = sliceGradShape(dy!, attrs);
    const shape = attrs['shape'] as number[];
    const out = Tensor.zeros(dy!.dtype, shape);
    const st = stridesOf(shape);
    // each output offset of the slice is hit once: copy dy there
    const at = gatherOffsets(iotaTensor(shape), r.shape, r.shape.map((n, d) => offsets(n, (i) => (r.begin[d]! + i * r.step[d]!) * st[d]!)));
    const src = dy!.data;
    for (let i = 0; i < at.size; i++) out.data[at.data[i]!] = src[i]!;
    return [out];
  },
  grad: (ctx) => {
    const g = ctx.outputGrads[0];
    if (!g) return [undefined];
    return [ctx.b.op('slice', [g], sliceAttrs(ctx.op.attrs))];
  },
  saves: {},
});

/** int32 0, 1, 2, ... in `shape`: flat offsets, to be moved by the gather kernels. */
function iotaTensor(shape: Shape): Tensor {
  const n = numElements(shape);
  const data = new Int32Array(n);
  for (let i = 0; i < n; i++) data[i] = i;
  return new Tensor('int32', shape, data);
}

// ---- concat / split ----

export const concat = defineOp({
  name: 'concat',
  family: 'movement',
  doc: 'joins tensors along an existing axis; all other dims must match',
  operands: [{ name: 'xs', variadic: true }],
  attrs: { axis: { type: 'int' } },
  infer: (types, attrs) => {
    const first = types[0]!;
    if (first.shape.length === 0) throw new ShapeError(`cannot concatenate scalars (operand 0 is ${formatType(first)})`);
    const axis = axisOf(attrs['axis'] as number, first.shape);
    const out = [...first.shape];
    out[axis] = 0;
    types.forEach((t, i) => {
      if (t.dtype !== first.dtype) {
        throw new ShapeError(`operand ${i} is ${formatType(t)} but operand 0 is ${formatType(first)}: dtypes differ (insert a cast)`);
      }
      const ok = t.shape.length === first.shape.length && t.shape.every((d, k) => k === axis || d === first.shape[k]);
      if (!ok) {
        throw new ShapeError(
          `operand ${i} has shape ${formatShape(t.shape)} but operand 0 has ${formatShape(first.shape)}: all dims except axis ${attrs['axis']} must match`,
        );
      }
      out[axis]! += t.shape[axis]!;
    });
    return [{ dtype: first.dtype, shape: out }];
  },
  kernel: (xs, attrs) => {
    const first = xs[0]!;
    const axis = axisOf(attrs['axis'] as number, first.shape);
    const outShape = [...first.shape];
    outShape[axis] = xs.reduce((n, t) => n + t.shape[axis]!, 0);
    const outer = numElements(first.shape.slice(0, axis));
    const inner = numElements(first.shape.slice(axis + 1));
    const out = allocData(first.dtype, numElements(outShape));
    let pos = 0;
    for (let o = 0; o < outer; o++) {
      for (const t of xs) {
        const chunk = t.shape[axis]! * inner;
        out.set(t.data.subarray(o * chunk, (o + 1) * chunk), pos);
        pos += chunk;
      }
    }
    return [new Tensor(first.dtype, outShape, out)];
  },
  grad: (ctx) => {
    const g = ctx.outputGrads[0];
    if (!g) return ctx.inputs.map(() => undefined);
    if (ctx.inputs.length === 1) return [g];
    const axis = axisOf(ctx.op.attrs['axis'] as number, g.type.shape);
    return ctx.b.ops('split', [g], { axis, sizes: ctx.inputs.map((x) => x.type.shape[axis]!) });
  },
  saves: {},
});

function checkSplit(shape: Shape, attrs: Attrs): { axis: number; sizes: number[] } {
  if (shape.length === 0) throw new ShapeError(`cannot split a scalar`);
  const axis = axisOf(attrs['axis'] as number, shape);
  const sizes = attrs['sizes'] as number[];
  if (sizes.length === 0) throw new ShapeError(`sizes must not be empty`);
  if (sizes.some((s) => s < 0)) throw new ShapeError(`sizes ${fmt(sizes)} contain a negative size`);
  const total = sizes.reduce((a, b) => a + b, 0);
  if (total !== shape[axis]) {
    throw new ShapeError(`sizes ${fmt(sizes)} sum to ${total} but axis ${attrs['axis']} of ${formatShape(shape)} has size ${shape[axis]}`);
  }
  return { axis, sizes };
}

export const split = defineOp({
  name: 'split',
  family: 'movement',
  doc: 'cuts a tensor along an axis into consecutive pieces of the given sizes (one result each)',
  operands: [{ name: 'x' }],
  attrs: { axis: { type: 'int', default: 0 }, sizes: { type: 'ints' } },
  infer: ([x], attrs) => {
    const { axis, sizes } = checkSplit(x!.shape, attrs);
    return sizes.map((s) => {
      const shape = [...x!.shape];
      shape[axis] = s;
      return { dtype: x!.dtype, shape };
    });
  },
  kernel: ([x], attrs) => {
    const { axis, sizes } = checkSplit(x!.shape, attrs);
    const st = stridesOf(x!.shape);
    let start = 0;
    return sizes.map((s) => {
      const shape = [...x!.shape];
      shape[axis] = s;
      const offs = identityOffsets(shape, st);
      offs[axis] = offsets(s, (i) => (start + i) * st[axis]!);
      start += s;
      return gatherOffsets(x!, shape, offs);
    });
  },
  grad: (ctx) => {
    if (ctx.outputGrads.every((g) => !g)) return [undefined];
    const parts = ctx.outputs.map((y, k) => ctx.outputGrads[k] ?? zerosShaped(ctx.b, y, y.type.shape));
    if (parts.length === 1) return [parts[0]];
    const axis = axisOf(ctx.op.attrs['axis'] as number, ctx.inputs[0]!.type.shape);
    return [ctx.b.op('concat', parts, { axis })];
  },
  saves: {},
});

// ---- gather ----

export const gather = defineOp({
  name: 'gather',
  family: 'movement',
  doc: 'ONNX Gather: picks slices along an axis by int32 indices (negative indices count from the end)',
  operands: [{ name: 'x' }, { name: 'indices', differentiable: false }],
  attrs: { axis: { type: 'int', default: 0 } },
  infer: ([x, ind], attrs) => {
    if (ind!.dtype !== 'int32') throw new ShapeError(`indices must be int32, got ${formatType(ind!)}`);
    if (x!.shape.length === 0) throw new ShapeError(`cannot gather from a scalar`);
    const axis = axisOf(attrs['axis'] as number, x!.shape);
    return result(x!, [...x!.shape.slice(0, axis), ...ind!.shape, ...x!.shape.slice(axis + 1)]);
  },
  kernel: ([x, ind], attrs) => {
    const shape = x!.shape;
    const axis = axisOf(attrs['axis'] as number, shape);
    const dim = shape[axis]!;
    const st = stridesOf(shape);
    const picks = Array.from(ind!.data, (i) => {
      if (i < -dim || i >= dim) {
        throw new Error(`gather: index ${i} is out of range for axis ${axis} of size ${dim} in ${formatShape(shape)}`);
      }
      return (i < 0 ? i + dim : i) * st[axis]!;
    });
    const flatShape = [...shape.slice(0, axis), picks.length, ...shape.slice(axis + 1)];
    const offs = identityOffsets(flatShape, st);
    offs[axis] = picks;
    const outShape = [...shape.slice(0, axis), ...ind!.shape, ...shape.slice(axis + 1)];
    return [gatherOffsets(x!, flatShape, offs).reshape(outShape)];
  },
  grad: (ctx) => {
    const g = ctx.outputGrads[0];
    if (!g) return [undefined, undefined];
    const [x, indices] = ctx.inputs;
    // rows picked more than once get the sum of their gradients
    const zeros = zerosShaped(ctx.b, x!, x!.type.shape);
    const dx = ctx.b.op('scatter_add', [zeros, indices!, g], { axis: ctx.op.attrs['axis'] as number });
    // set_available_memory on a lookup applies to its update too, as PopART plans them together
    const memory = ctx.outputs[0]!.uses.find((u) => u.op.kind === 'set_available_memory');
    return [memory ? ctx.b.op('set_available_memory', [dx], { proportion: memory.op.attrs['proportion'] as number }) : dx, undefined];
  },
  saves: { operands: [1] },
});

function scatterAxis(x: TensorType, ind: TensorType, upd: TensorType, attrs: Attrs): number {
  if (ind.dtype !== 'int32') throw new ShapeError(`indices must be int32, got ${formatType(ind)}`);
  if (x.dtype === 'bool') throw new ShapeError(`operand type bool is not a numeric type (insert a cast)`);
  if (upd.dtype !== x.dtype) throw new ShapeError(`updates are ${formatType(upd)} but data is ${formatType(x)}: dtypes differ (insert a cast)`);
  if (x.shape.length === 0) throw new ShapeError(`cannot scatter into a scalar`);
  const axis = axisOf(attrs['axis'] as number, x.shape);
  const want = [...x.shape.slice(0, axis), ...ind.shape, ...x.shape.slice(axis + 1)];
  if (want.length !== upd.shape.length || want.some((d, i) => d !== upd.shape[i])) {
    throw new ShapeError(
      `updates have shape ${formatShape(upd.shape)} but data ${formatShape(x.shape)} with indices ${formatShape(ind.shape)} on axis ${attrs['axis']} needs ${fmt(want)}`,
    );
  }
  return axis;
}

/** The adjoint of gather: adds each slice of `updates` into the row of `data` its index names. */
export const scatterAdd = defineOp({
  name: 'scatter_add',
  family: 'movement',
  doc: 'data with updates added at int32 indices along an axis (the adjoint of gather: updates are shaped like gather(data, indices, axis); repeated indices add up; negative indices count from the end)',
  operands: [{ name: 'data' }, { name: 'indices', differentiable: false }, { name: 'updates' }],
  attrs: { axis: { type: 'int', default: 0 } },
  infer: ([x, ind, upd], attrs) => {
    scatterAxis(x!, ind!, upd!, attrs);
    return result(x!, x!.shape);
  },
  kernel: ([x, ind, upd], attrs) => {
    const axis = scatterAxis(x!, ind!, upd!, attrs);
    const shape = x!.shape;
    const dim = shape[axis]!;
    const outer = numElements(shape.slice(0, axis));
    const inner = numElements(shape.slice(axis + 1));
    const rows = Array.from(ind!.data, (i) => {
      if (i < -dim || i >= dim) {
        throw new Error(`scatter_add: index ${i} is out of range for axis ${axis} of size ${dim} in ${formatShape(shape)}`);
      }
      return i < 0 ? i + dim : i;
    });
    const out = x!.data.slice();
    const src = upd!.data;
    const conv = storeConverter(x!.dtype);
    const m = rows.length;
    for (let o = 0; o < outer; o++) {
      for (let j = 0; j < m; j++) {
        const to = (o * dim + rows[j]!) * inner;
        const from = (o * m + j) * inner;
        for (let k = 0; k < inner; k++) {
          const v = out[to + k]! + src[from + k]!;
          out[to + k] = conv ? conv(v) : v;
        }
      }
    }
    return [new Tensor(x!.dtype, shape, out)];
  },
  grad: (ctx) => {
    const g = ctx.outputGrads[0];
    if (!g) return [undefined, undefined, undefined];
    return [g, undefined, ctx.b.op('gather', [g, ctx.inputs[1]!], { axis: ctx.op.attrs['axis'] as number })];
  },
  saves: { operands: [1] },
});

// ---- squeeze / unsqueeze / flatten ----

function squeezedShape(shape: Shape, axes: readonly number[] | undefined): number[] {
  if (axes === undefined || axes.length === 0) return shape.filter((d) => d !== 1);
  const norm = uniqueAxes(axes, shape);
  for (const a of norm) {
    if (shape[a] !== 1) throw new ShapeError(`cannot squeeze axis ${a} of size ${shape[a]} in ${formatShape(shape)}`);
  }
  return shape.filter((_, i) => !norm.includes(i));
}

export const squeeze = defineOp({
  name: 'squeeze',
  family: 'movement',
  doc: 'removes size-1 dims: the given axes (each must have size 1), or all of them when axes is absent or empty',
  operands: [{ name: 'x' }],
  attrs: { axes: { type: 'ints', optional: true } },
  infer: ([x], attrs) => result(x!, squeezedShape(x!.shape, attrs['axes'] as number[] | undefined)),
  kernel: ([x], attrs) => [sameData(x!, squeezedShape(x!.shape, attrs['axes'] as number[] | undefined))],  grad: reshapeBack,
  saves: {},
});

function unsqueezedShape(shape: Shape, axes: readonly number[]): number[] {
  const outRank = shape.length + axes.length;
  const bad = axes.find((a) => a < -outRank || a >= outRank);
  if (bad !== undefined) {
    throw new ShapeError(`axis ${bad} is out of range for the rank-${outRank} result of unsqueezing ${formatShape(shape)} by axes ${fmt(axes)}`);
  }
  const norm = uniqueAxes(axes, shape, outRank);
  const out: number[] = [];
  let k = 0;
  for (let i = 0; i < outRank; i++) out.push(norm.includes(i) ? 1 : shape[k++]!);
  return out;
}

export const unsqueeze = defineOp({
  name: 'unsqueeze',
  family: 'movement',
  doc: 'inserts size-1 dims at the given axes of the result (negative axes count from the end of the result)',
  operands: [{ name: 'x' }],
  attrs: { axes: { type: 'ints' } },
  infer: ([x], attrs) => result(x!, unsqueezedShape(x!.shape, attrs['axes'] as number[])),
  kernel: ([x], attrs) => [sameData(x!, unsqueezedShape(x!.shape, attrs['axes'] as number[]))],  grad: reshapeBack,
  saves: {},
});

function flattenedShape(shape: Shape, axis: number): number[] {
  const rank = shape.length;
  if (!Number.isInteger(axis) || axis < -rank || axis > rank) {
    throw new ShapeError(`axis ${axis} is out of range [${-rank}, ${rank}] for ${formatShape(shape)}`);
  }
  const a = axis < 0 ? axis + rank : axis;
  return [numElements(shape.slice(0, a)), numElements(shape.slice(a))];
}

export const flatten = defineOp({
  name: 'flatten',
  family: 'movement',
  doc: 'ONNX Flatten: 2-D result [prod(dims before axis), prod(dims from axis)]',
  operands: [{ name: 'x' }],
  attrs: { axis: { type: 'int', default: 1 } },
  infer: ([x], attrs) => result(x!, flattenedShape(x!.shape, attrs['axis'] as number)),
  kernel: ([x], attrs) => [sameData(x!, flattenedShape(x!.shape, attrs['axis'] as number))],  grad: reshapeBack,
  saves: {},
});

// ---- expand / tile ----

function expandedShape(shape: Shape, target: readonly number[]): number[] {
  const bad = target.find((d) => d < 0);
  if (bad !== undefined) throw new ShapeError(`shape ${fmt(target)} has a negative dimension ${bad}`);
  const n = Math.max(shape.length, target.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const a = i < n - shape.length ? 1 : shape[i - (n - shape.length)]!;
    const b = i < n - target.length ? 1 : target[i - (n - target.length)]!;
    if (a !== b && a !== 1 && b !== 1) {
      throw new ShapeError(`cannot expand ${formatShape(shape)} to ${fmt(target)}: dimension ${a} does not broadcast with ${b}`);
    }
    out.push(a === 1 ? b : a);
  }
  return out;
}

export const expand = defineOp({
  name: 'expand',
  family: 'movement',
  doc: 'ONNX Expand: broadcasts x and the shape against each other (size-1 dims of either side stretch)',
  operands: [{ name: 'x' }],
  attrs: { shape: { type: 'ints' } },
  infer: ([x], attrs) => result(x!, expandedShape(x!.shape, attrs['shape'] as number[])),
  kernel: ([x], attrs) => {
    const outShape = expandedShape(x!.shape, attrs['shape'] as number[]);
    const bst = broadcastStrides(x!.shape, outShape);
    return [gatherOffsets(x!, outShape, outShape.map((n, d) => offsets(n, (i) => i * bst[d]!)))];
  },
  grad: (ctx) => {
    const g = ctx.outputGrads[0];
    return [g && sumToShape(ctx.b, g, ctx.inputs[0]!.type.shape)];
  },
  saves: {},
});

function tiledShape(shape: Shape, repeats: readonly number[]): number[] {
  if (repeats.length !== shape.length) {
    throw new ShapeError(`repeats ${fmt(repeats)} has ${repeats.length} entries but ${formatShape(shape)} has rank ${shape.length}`);
  }
  const bad = repeats.find((r) => r < 0);
  if (bad !== undefined) throw new ShapeError(`repeats ${fmt(repeats)} contain a negative count ${bad}`);
  return shape.map((d, i) => d * repeats[i]!);
}

export const tile = defineOp({
  name: 'tile',
  family: 'movement',
  doc: 'repeats the whole tensor repeats[i] times along each dim i',
  operands: [{ name: 'x' }],
  attrs: { repeats: { type: 'ints' } },
  infer: ([x], attrs) => result(x!, tiledShape(x!.shape, attrs['repeats'] as number[])),
  kernel: ([x], attrs) => {
    const shape = x!.shape;
    const outShape = tiledShape(shape, attrs['repeats'] as number[]);
    const st = stridesOf(shape);
    return [gatherOffsets(x!, outShape, outShape.map((n, d) => offsets(n, (i) => (i % shape[d]!) * st[d]!)))];
  },
  grad: (ctx) => {
    const g = ctx.outputGrads[0];
    if (!g) return [undefined];
    const shape = ctx.inputs[0]!.type.shape;
    const repeats = ctx.op.attrs['repeats'] as number[];
    if (repeats.every((r) => r === 1)) return [g];
    // result index k·d + i along a dim is copy k of element i: view as [r0, d0, r1, d1, ...] and sum the copies
    const split = ctx.b.op('reshape', [g], { shape: shape.flatMap((d, i) => [repeats[i]!, d]) });
    return [ctx.b.op('reduce_sum', [split], { axes: shape.map((_, i) => 2 * i), keepdims: false })];
  },
  saves: {},
});

// ---- pad ----

type PadMode = 'constant' | 'reflect' | 'edge';

function checkPads(shape: Shape, pads: readonly number[], mode: PadMode): number[] {
  const rank = shape.length;
  if (pads.length !== 2 * rank) {
    throw new ShapeError(`pads ${fmt(pads)} has ${pads.length} entries but ${formatShape(shape)} needs ${2 * rank} (all begins, then all ends)`);
  }
  return shape.map((dim, i) => {
    const b = pads[i]!;
    const e = pads[i + rank]!;
    const size = dim + b + e;
    if (b < -dim || e < -dim || size < 0) {
      throw new ShapeError(`pads ${fmt(pads)} remove more than the ${dim} elements of axis ${i} of ${formatShape(shape)}`);
    }
    if (mode === 'reflect' && ((b > 0 && b >= dim) || (e > 0 && e >= dim))) {
      throw new ShapeError(`reflect pads ${fmt(pads)} must be smaller than the size ${dim} of axis ${i} of ${formatShape(shape)}`);
    }
    if (mode === 'edge' && dim === 0 && size > 0) {
      throw new ShapeError(`edge pads ${fmt(pads)} need a non-empty axis ${i} of ${formatShape(shape)}`);
    }
    return size;
  });
}

/** Input index read for output index `o` of a padded axis, or -1 for the constant fill. */
export function padSourceIndex(o: number, begin: number, dim: number, mode: PadMode): number {
  const i = o - begin;
  if (i >= 0 && i < dim) return i;
  switch (mode) {
    case 'constant':
      return -1;
    case 'edge':
      return i < 0 ? 0 : dim - 1;
    case 'reflect':
      return i < 0 ? -i : 2 * (dim - 1) - i;
  }
}

export const pad = defineOp({
  name: 'pad',
  family: 'movement',
  doc: 'ONNX Pad: pads = all begins then all ends (negative crops); constant fill, reflect (mirror without the edge) or edge (repeat the edge)',
  operands: [{ name: 'x' }],
  attrs: {
    pads: { type: 'ints' },
    mode: { type: 'string', default: 'constant', values: ['constant', 'reflect', 'edge'] },
    value: { type: 'float', default: 0, doc: 'fill value of constant mode' },
  },
  infer: ([x], attrs) => result(x!, checkPads(x!.shape, attrs['pads'] as number[], attrs['mode'] as PadMode)),
  kernel: ([x], attrs) => {
    const shape = x!.shape;
    const pads = attrs['pads'] as number[];
    const mode = attrs['mode'] as PadMode;
    const outShape = checkPads(shape, pads, mode);
    const st = stridesOf(shape);
    const offs = outShape.map((n, d) =>
      offsets(n, (o) => {
        const i = padSourceIndex(o, pads[d]!, shape[d]!, mode);
        return i < 0 ? -1 : i * st[d]!;
      }),
    );
    return [gatherOffsets(x!, outShape, offs, attrs['value'] as number)];
  },
  grad: (ctx) => {
    const g = ctx.outputGrads[0];
    if (!g) return [undefined];
    const b = ctx.b;
    const shape = ctx.inputs[0]!.type.shape;
    const rank = shape.length;
    const pads = ctx.op.attrs['pads'] as number[];
    const mode = ctx.op.attrs['mode'] as PadMode;
    // constant: each input element appears once, shifted by the begin pad; negated pads undo the shift
    // (and put zeros where the forward cropped)
    if (mode === 'constant') return [b.op('pad', [g], { pads: pads.map((p) => -p) })];
    // reflect/edge = crop(pad(x, positive pads), negative pads): undo the crop with zeros, then fold
    // the mirrored/repeated borders back onto the elements they copy, one axis at a time
    let v = g;
    if (pads.some((p) => p < 0)) v = b.op('pad', [v], { pads: pads.map((p) => (p < 0 ? -p : 0)) });
    for (let d = 0; d < rank; d++) {
      const before = Math.max(pads[d]!, 0);
      const after = Math.max(pads[d + rank]!, 0);
      if (before > 0 || after > 0) v = foldPadAxis(b, v, d, shape[d]!, before, after, mode);
    }
    return [v];
  },
  saves: {},
});

/**
 * Adjoint of reflect/edge padding of one axis of size `dim` by non-negative `before`/`after`:
 * g (of size before + dim + after) summed onto the input elements each position copies.
 */
function foldPadAxis(b: GraphBuilder, g: Value, axis: number, dim: number, before: number, after: number, mode: 'reflect' | 'edge'): Value {
  const parts = [sliceAxis(b, g, axis, before, before + dim)];
  const end = before + dim + after;
  if (mode === 'reflect') {
    // result positions 0..before-1 copy inputs before..1; reversed they land on 1..before
    if (before > 0) parts.push(padAxis(b, reverseAxis(b, sliceAxis(b, g, axis, 0, before), axis), axis, 1, dim - 1 - before));
    // positions after the core copy inputs dim-2, dim-3, ...; reversed they land on dim-1-after..dim-2
    if (after > 0) parts.push(padAxis(b, reverseAxis(b, sliceAxis(b, g, axis, before + dim, end), axis), axis, dim - 1 - after, 1));
  } else {
    // every border position copies the first or last element
    const sum = (v: Value) => b.op('reduce_sum', [v], { axes: [axis], keepdims: true });
    if (before > 0) parts.push(padAxis(b, sum(sliceAxis(b, g, axis, 0, before)), axis, 0, dim - 1));
    if (after > 0) parts.push(padAxis(b, sum(sliceAxis(b, g, axis, before + dim, end)), axis, dim - 1, 0));
  }
  return addAll(b, parts);
}

// ---- dynamic_slice ----

/** dynamic_slice's window (`size` elements from the start) and its result (every `step`-th of them). */
function dynamicSliceShape(x: TensorType, start: TensorType, attrs: Attrs): { axis: number; shape: number[]; window: number[]; step: number } {
  if (start.dtype !== 'int32' || start.shape.length !== 0) {
    throw new ShapeError(`start must be an int32 scalar, got ${formatType(start)}`);
  }
  const axis = axisOf(attrs['axis'] as number, x.shape);
  const size = attrs['size'] as number;
  if (size < 0 || size > x.shape[axis]!) {
    throw new ShapeError(`size ${size} does not fit axis ${attrs['axis']} of size ${x.shape[axis]} in ${formatShape(x.shape)}`);
  }
  const step = attrs['step'] as number;
  if (!(step >= 1)) throw new ShapeError(`step ${step} must be at least 1`);
  const window = [...x.shape];
  window[axis] = size;
  const shape = [...window];
  shape[axis] = Math.ceil(size / step);
  return { axis, shape, window, step };
}

export const dynamicSlice = defineOp({
  name: 'dynamic_slice',
  family: 'movement',
  doc: 'PopTorch dynamic_slice: of the `size` elements along `axis` from a run-time start (clamped to [0, dim - size]), every `step`-th: x[start : start + size : step]',
  operands: [{ name: 'x' }, { name: 'start', differentiable: false }],
  attrs: { axis: { type: 'int' }, size: { type: 'int' }, step: { type: 'int', default: 1 } },
  infer: ([x, start], attrs) => result(x!, dynamicSliceShape(x!, start!, attrs).shape),
  kernel: ([x, start], attrs) => {
    const { axis, shape, window, step } = dynamicSliceShape(x!, start!, attrs);
    const s = clamp(start!.data[0]!, 0, x!.shape[axis]! - window[axis]!);
    const st = stridesOf(x!.shape);
    const offs = identityOffsets(shape, st);
    offs[axis] = offsets(shape[axis]!, (i) => (s + i * step) * st[axis]!);
    return [gatherOffsets(x!, shape, offs)];
  },
  grad: (ctx) => {
    const g = ctx.outputGrads[0];
    if (!g) return [undefined, undefined];
    const [x, start] = ctx.inputs;
    const axis = ctx.op.attrs['axis'] as number;
    const size = ctx.op.attrs['size'] as number;
    const step = ctx.op.attrs['step'] as number;
    // with a step, the gradient first fills its places in a zero window of `size` elements
    let window = g;
    if (step > 1) {
      const shape = [...x!.type.shape];
      shape[axisOf(axis, shape)] = size;
      window = ctx.b.op('slice_grad', [g], { shape, starts: [0], ends: [size], axes: [axis], steps: [step] });
    }
    const zeros = zerosShaped(ctx.b, x!, x!.type.shape);
    return [ctx.b.op('dynamic_update_slice', [zeros, window, start!], { axis }), undefined];
  },
  saves: { operands: [1] },
});

function dynamicUpdateAxis(x: TensorType, upd: TensorType, start: TensorType, attrs: Attrs): number {
  if (start.dtype !== 'int32' || start.shape.length !== 0) {
    throw new ShapeError(`start must be an int32 scalar, got ${formatType(start)}`);
  }
  if (upd.dtype !== x.dtype) throw new ShapeError(`update is ${formatType(upd)} but x is ${formatType(x)}: dtypes differ (insert a cast)`);
  const axis = axisOf(attrs['axis'] as number, x.shape);
  const fits = upd.shape.length === x.shape.length && upd.shape.every((d, i) => (i === axis ? d <= x.shape[i]! : d === x.shape[i]));
  if (!fits) {
    throw new ShapeError(
      `update ${formatShape(upd.shape)} does not fit x ${formatShape(x.shape)}: it needs the same dims except axis ${attrs['axis']}, where it may be at most ${x.shape[axis]}`,
    );
  }
  return axis;
}

/** Writes a window into a tensor at a run-time start: the adjoint of dynamic_slice. */
export const dynamicUpdateSlice = defineOp({
  name: 'dynamic_update_slice',
  family: 'movement',
  doc: 'x with `update` written over update.shape[axis] consecutive elements along `axis` from a run-time start, clamped to [0, dim - size] as dynamic_slice does',
  operands: [{ name: 'x' }, { name: 'update' }, { name: 'start', differentiable: false }],
  attrs: { axis: { type: 'int' } },
  infer: ([x, upd, start], attrs) => {
    dynamicUpdateAxis(x!, upd!, start!, attrs);
    return result(x!, x!.shape);
  },
  kernel: ([x, upd, start], attrs) => {
    const axis = dynamicUpdateAxis(x!, upd!, start!, attrs);
    const shape = x!.shape;
    const size = upd!.shape[axis]!;
    const s = clamp(start!.data[0]!, 0, shape[axis]! - size);
    const outer = numElements(shape.slice(0, axis));
    const inner = numElements(shape.slice(axis + 1));
    const out = x!.data.slice();
    const chunk = size * inner;
    for (let o = 0; o < outer; o++) out.set(upd!.data.subarray(o * chunk, (o + 1) * chunk), (o * shape[axis]! + s) * inner);
    return [new Tensor(x!.dtype, shape, out)];
  },
  grad: (ctx) => {
    const g = ctx.outputGrads[0];
    if (!g) return [undefined, undefined, undefined];
    const [, upd, start] = ctx.inputs;
    const axis = ctx.op.attrs['axis'] as number;
    // the window's old contents are overwritten, so x gets g with the window zeroed
    const hole = ctx.b.op('dynamic_update_slice', [g, zerosShaped(ctx.b, upd!, upd!.type.shape), start!], { axis });
    const window = ctx.b.op('dynamic_slice', [g, start!], { axis, size: upd!.type.shape[axisOf(axis, g.type.shape)]! });
    return [hole, window, undefined];
  },
  saves: { operands: [2] },
});

export const MOVEMENT_OPS: OpDef[] = [
  reshape, transpose, slice, concat, split, gather, squeeze, unsqueeze, expand, flatten, pad, tile, dynamicSlice,
  sliceGrad, scatterAdd, dynamicUpdateSlice,
];
