import { Attrs, DType, Op, Value, castScalar, isNarrowInt, normalizeAxis, numElements } from '@tilegraph/ir';
import { deviceType } from '../types.js';
import { GraphEmitter, shapeLiteral } from '../context.js';
import { emitMap, widenToInt32 } from './elementwise.js';
import type { Lowering } from './index.js';
import { checkDynamicSlice, checkMultiSlice, checkMultiUpdateAdd } from './preconditions.js';
import { explicitMemoryProportion } from './poplin-options.js';

/**
 * Data movement. Reshape-like ops, transpose, slice, expand, concat, split, pad and tile are
 * Tensor views (no code: Poplar copies data only where an op reads it); gather and scatter_add
 * use popops::multiSlice / multiUpdateAdd, dynamic slices popops::dynamicSlice / dynamicUpdate
 * (their PopLibs preconditions checked first, see preconditions.ts). 16-bit integers slice as the
 * half elements of the same bits; 8- and 16-bit scatter_add adds in int32.
 */

/** Per axis: the first index read and the step (ONNX Slice: negative indices, clamping, negative steps). */
export function resolveSlice(shape: readonly number[], attrs: Attrs): { begin: number[]; step: number[]; size: number[] } {
  const starts = attrs['starts'] as number[];
  const ends = attrs['ends'] as number[];
  const axes = ((attrs['axes'] as number[] | undefined) ?? starts.map((_, i) => i)).map((a) => normalizeAxis(a, shape.length));
  const steps = (attrs['steps'] as number[] | undefined) ?? starts.map(() => 1);
  const begin = shape.map(() => 0);
  const step = shape.map(() => 1);
  const size = [...shape];
  axes.forEach((a, k) => {
    const dim = shape[a]!;
    const s = steps[k]!;
    let lo = starts[k]!;
    let hi = ends[k]!;
    if (lo < 0) lo += dim;
    if (hi < 0) hi += dim;
    let n: number;
    if (s > 0) {
      lo = Math.min(Math.max(lo, 0), dim);
      hi = Math.min(Math.max(hi, 0), dim);
      n = hi > lo ? Math.ceil((hi - lo) / s) : 0;
    } else {
      lo = Math.min(Math.max(lo, 0), dim - 1);
      hi = Math.min(Math.max(hi, -1), dim - 1);
      n = dim > 0 && lo > hi ? Math.ceil((lo - hi) / -s) : 0;
    }
    size[a] = n;
    begin[a] = n > 0 ? lo : 0;
    step[a] = s;
  });
  return { begin, step, size };
}

/** A view of `x` reading, per axis, `size` elements from `begin` with `step`. */
export function sliceView(x: string, shape: readonly number[], r: { begin: number[]; step: number[]; size: number[] }): string {
  let v = x;
  shape.forEach((dim, d) => {
    const b = r.begin[d]!;
    const s = r.step[d]!;
    const n = r.size[d]!;
    if (n === dim && s === 1 && b === 0) return;
    if (n === 0) {
      v += `.slice(0, 0, ${d})`;
      return;
    }
    if (s > 0) {
      v += `.slice(${b}, ${b + (n - 1) * s + 1}, ${d})`;
      if (s > 1) v += `.subSample(${s}, ${d})`;
    } else {
      const lo = b + (n - 1) * s;
      v += `.slice(${lo}, ${b + 1}, ${d})`;
      if (s < -1) v += `.subSample(${-s}, ${d})`;
      v += `.reverse(${d})`;
    }
  });
  return v;
}

/** A view-defining lowering: the result lives where the operand lives. */
function view(f: (x: string, op: Op) => string): Lowering {
  return (op, e) => {
    const r = e.ref(op.operands[0]!);
    const x = e.tensor(op.operands[0]!, r.ipu);
    e.define(op.result, f(x, op), r.ipu, r.roots);
  };
}

const reshapeTo = view((x, op) => `${x}.reshape(${shapeLiteral(op.result.type.shape)})`);

function lowerTranspose(op: Op, e: GraphEmitter): void {
  const rank = op.operands[0]!.type.shape.length;
  const perm = (op.attrs['perm'] as number[] | undefined) ?? Array.from({ length: rank }, (_, i) => rank - 1 - i);
  view((x) => (rank < 2 ? x : `${x}.dimShuffle({${perm.join(', ')}})`))(op, e);
}

function lowerSlice(op: Op, e: GraphEmitter): void {
  const shape = op.operands[0]!.type.shape;
  view((x) => sliceView(x, shape, resolveSlice(shape, op.attrs)))(op, e);
}

/** Concatenation of views on the op's IPU (parts elsewhere are copied over). */
function lowerConcat(op: Op, e: GraphEmitter): void {
  const ipu = e.ipuOf(op);
  const axis = normalizeAxis(op.attrs['axis'] as number, op.result.type.shape.length);
  if (op.operands.length === 1) {
    view((x) => x)(op, e);
    return;
  }
  const roots = new Set<string>();
  const parts = op.operands.map((v, i) => {
    for (const r of e.ref(v).roots) roots.add(r);
    return e.operand(op, i);
  });
  e.define(op.result, `poplar::concat({${parts.join(', ')}}, ${axis})`, ipu, roots);
}

function lowerSplit(op: Op, e: GraphEmitter): void {
  const x = op.operands[0]!;
  const r = e.ref(x);
  const t = e.tensor(x, r.ipu);
  const axis = normalizeAxis(op.attrs['axis'] as number, x.type.shape.length);
  let start = 0;
  for (const res of op.results) {
    const n = res.type.shape[axis]!;
    e.define(res, `${t}.slice(${start}, ${start + n}, ${axis})`, r.ipu, r.roots);
    start += n;
  }
}

function lowerExpand(op: Op, e: GraphEmitter): void {
  view((x) => `broadcastTo(${x}, ${shapeLiteral(op.result.type.shape)})`)(op, e);
}

/** Repeats along one axis: `count` copies of the view concatenated (tile semantics). */
function repeatAxis(x: string, count: number, axis: number): string {
  if (count === 1) return x;
  return `poplar::concat(std::vector<poplar::Tensor>(${count}, ${x}), ${axis})`;
}

function lowerTile(op: Op, e: GraphEmitter): void {
  const repeats = op.attrs['repeats'] as number[];
  view((x) => {
    let v = x;
    repeats.forEach((r, d) => {
      v = r === 0 ? `${v}.slice(0, 0, ${d})` : repeatAxis(v, r, d);
    });
    return v;
  })(op, e);
}

/** Zero padding that leaves runs of fewer input elements than this between zeros is written out. */
const MIN_PADDED_RUN = 4;
/** ... when the input has at least this many elements (a small view costs little to read). */
const MIN_WRITTEN_PAD = 4096;
/** Element types popops::zero has instances for. */
const ZERO_TYPES: readonly DType[] = ['float32', 'float16', 'int32', 'uint32'];

/**
 * Elements of the input that lie next to each other in the padded result: the input's extent
 * from its last padded axis on.
 */
function paddedRun(shape: readonly number[], pads: readonly number[]): number {
  const rank = shape.length;
  let last = -1;
  for (let d = 0; d < rank; d++) if (pads[d] !== 0 || pads[d + rank] !== 0) last = d;
  return last < 0 ? numElements(shape) : numElements(shape.slice(last));
}

/**
 * pad: crops and constant / edge / reflect borders as views, per axis. Zeros between short runs
 * (spreading every element out, as the input gradient of a strided convolution does) are a
 * tensor of their own instead: a view of one region per element made every reader gather element
 * by element (a million regions for a 32x32x32x32 gradient), where zeroing the result and copying
 * the input into it moves whole strided runs once.
 */
function lowerPad(op: Op, e: GraphEmitter): void {
  const x = op.operands[0]!;
  const shape = x.type.shape;
  const rank = shape.length;
  const pads = op.attrs['pads'] as number[];
  const mode = op.attrs['mode'] as string;
  const dtype = x.type.dtype;
  const ipu = e.ipuOf(op);
  if (
    mode === 'constant' &&
    (op.attrs['value'] as number) === 0 &&
    ZERO_TYPES.includes(dtype) &&
    pads.every((p) => p >= 0) &&
    numElements(shape) >= MIN_WRITTEN_PAD &&
    paddedRun(shape, pads) < MIN_PADDED_RUN
  ) {
    const t = e.newResult(op.result, ipu);
    const interior = shape.reduce((view, n, d) => (pads[d] || pads[d + rank] ? `${view}.slice(${pads[d]!}, ${pads[d]! + n}, ${d})` : view), t);
    e.emit(`popops::zero(${e.g(ipu)}, ${t}, prog, ${e.debugName('pad')});`);
    e.emit(`prog.add(poplar::program::Copy(${e.operand(op, 0)}, ${interior}));`);
    return;
  }
  const roots = e.ref(x).roots;
  let v = e.operand(op, 0);
  const cur = [...shape];
  let fill: string | undefined;
  const fillOf = () => (fill ??= e.scalarConstant(dtype, castScalar(dtype, op.attrs['value'] as number), ipu));
  for (let d = 0; d < rank; d++) {
    let before = pads[d]!;
    let after = pads[d + rank]!;
    const dim = shape[d]!;
    // crops first (negative pads)
    const lo = before < 0 ? -before : 0;
    const hi = after < 0 ? dim + after : dim;
    if (lo > 0 || hi < dim) v = `${v}.slice(${lo}, ${Math.max(lo, hi)}, ${d})`;
    cur[d] = Math.max(0, hi - lo);
    before = Math.max(before, 0);
    after = Math.max(after, 0);
    if (before === 0 && after === 0) continue;
    const parts: string[] = [];
    const border = (count: number, atStart: boolean): string => {
      const s = [...cur];
      s[d] = count;
      if (mode === 'constant') return `broadcastTo(${fillOf()}, ${shapeLiteral(s)})`;
      if (mode === 'edge') {
        const edge = atStart ? `${v}.slice(0, 1, ${d})` : `${v}.slice(${cur[d]! - 1}, ${cur[d]!}, ${d})`;
        return `${edge}.broadcast(${count}, ${d})`;
      }
      // reflect: mirror without the edge element
      return atStart ? `${v}.slice(1, ${count + 1}, ${d}).reverse(${d})` : `${v}.slice(${cur[d]! - 1 - count}, ${cur[d]! - 1}, ${d}).reverse(${d})`;
    };
    if (before > 0) parts.push(border(before, true));
    parts.push(v);
    if (after > 0) parts.push(border(after, false));
    const local = e.local('p');
    e.emit(`poplar::Tensor ${local} = poplar::concat({${parts.join(', ')}}, ${d});`);
    v = local;
    cur[d] = cur[d]! + before + after;
  }
  e.define(op.result, v, ipu, roots);
}

/** slice_grad: zeros, with dy copied to where the slice read. */
function lowerSliceGrad(op: Op, e: GraphEmitter): void {
  const ipu = e.ipuOf(op);
  const shape = op.attrs['shape'] as number[];
  const t = e.newResult(op.result, ipu);
  e.emit(`popops::zero(${e.g(ipu)}, ${t}, prog, ${e.debugName('slice_grad')});`);
  if (numElements(op.operands[0]!.type.shape) > 0) {
    e.emit(`prog.add(poplar::program::Copy(${e.operand(op, 0)}, ${sliceView(t, shape, resolveSlice(shape, op.attrs))}));`);
  }
}

/**
 * How a tensor of `dtype` goes through PopLibs' slice vertices: 16-bit integers (which have none)
 * as the half elements of the same bits, the vertices copying them unchanged; others as they are.
 */
function sliceCarrier(dtype: DType): { readonly dtype: DType; readonly view: (t: string) => string; readonly back: (t: string) => string } {
  if (dtype !== 'int16' && dtype !== 'uint16') return { dtype, view: (t) => t, back: (t) => t };
  return { dtype: 'float16', view: (t) => `${t}.reinterpret(poplar::HALF)`, back: (t) => `${t}.reinterpret(${deviceType(dtype).poplar})` };
}

/** Offsets for multiSlice / multiUpdateAdd: indices wrapped into [0, dim), as uint32 [n, 1]. */
function indexOffsets(op: Op, e: GraphEmitter, indicesOperand: number, dim: number): string {
  const ind = op.operands[indicesOperand]!;
  const ipu = e.ipuOf(op);
  const n = numElements(ind.type.shape);
  const off = e.newTensor('uint32', [n], ipu, 'offsets');
  const src = e.operand(op, indicesOperand);
  emitMap(e, 'wrap_index', 'uint32', [n], ipu, [{ dtype: 'int32', shape: [n], tensor: () => `${src}.flatten()` }], off, 'gather_offsets', { dim });
  return `${off}.reshape({${n}, 1})`;
}

function lowerGather(op: Op, e: GraphEmitter): void {
  const x = op.operands[0]!;
  const ind = op.operands[1]!;
  const ipu = e.ipuOf(op);
  const shape = x.type.shape;
  const axis = normalizeAxis(op.attrs['axis'] as number, shape.length);
  const n = numElements(ind.type.shape);
  const out = op.result;
  if (numElements(out.type.shape) === 0) {
    e.newResult(out, ipu);
    return;
  }
  const carrier = sliceCarrier(x.type.dtype);
  checkMultiSlice(e, carrier.dtype, shape, [n, 1], [axis], [1]);
  const offsets = indexOffsets(op, e, 1, shape[axis]!);
  const xin = carrier.view(e.operand(op, 0));
  const outer = shape.slice(0, axis);
  const inner = shape.slice(axis + 1);
  const proportion = explicitMemoryProportion(op);
  if (proportion !== undefined) {
    // planned as an embedding lookup: the table viewed as [entries, outer × inner]
    const A = numElements(outer);
    const B = numElements(inner);
    const D = shape[axis]!;
    const plan = slicePlan(e, ipu, carrier.dtype, D, A * B, n, proportion, 'slice');
    const table = `${xin}.reshape({${A}, ${D}, ${B}}).dimShuffle({1, 0, 2}).reshape({${D}, ${A * B}})`;
    e.countResult(x.type.dtype, out.type.shape, ipu, e.valueLabel(out));
    const rows = e.local('s');
    e.emit(`poplar::Tensor ${rows} = popops::multiSlice(${e.g(ipu)}, ${table}, ${offsets}, {0}, {1}, prog, ${plan}, poplar::OptionFlags(), ${e.debugName(e.valueLabel(out))});`);
    // [n, 1, A × B] -> [A, n, B] -> the result's shape
    e.define(out, carrier.back(`${rows}.reshape({${n}, ${A}, ${B}}).dimShuffle({1, 0, 2}).reshape(${shapeLiteral(out.type.shape)})`), ipu);
    return;
  }
  // multiSlice gives [n, ...x with axis size 1]: drop that dim and move n into the axis position
  const sliced = e.local('s');
  e.countResult(x.type.dtype, out.type.shape, ipu, e.valueLabel(out));
  e.emit(
    `poplar::Tensor ${sliced} = popops::multiSlice(${e.g(ipu)}, ${xin}, ${offsets}, {${axis}}, {1}, prog, popops::SlicePlan(), poplar::OptionFlags(), ${e.debugName(e.valueLabel(out))});`,
  );
  const perm = [...outer.map((_, i) => i + 1), 0, ...inner.map((_, i) => outer.length + 1 + i)];
  e.define(out, carrier.back(`${sliced}.reshape(${shapeLiteral([n, ...outer, ...inner])}).dimShuffle({${perm.join(', ')}}).reshape(${shapeLiteral(out.type.shape)})`), ipu);
}

/**
 * scatter_add → popops::multiUpdateAdd, which takes a 2-D base [numBaseElements, elemSize] and
 * slices [n, 1, elemSize]: the result is viewed with the scatter axis first and the other axes
 * flattened into rows, the updates likewise.
 */
function lowerScatterAdd(op: Op, e: GraphEmitter): void {
  const [data, ind, upd] = op.operands as [Value, Value, Value];
  const ipu = e.ipuOf(op);
  const g = e.g(ipu);
  const shape = data.type.shape;
  const axis = normalizeAxis(op.attrs['axis'] as number, shape.length);
  const n = numElements(ind.type.shape);
  const dtype = data.type.dtype;
  const t = e.newResult(op.result, ipu);
  if (numElements(shape) === 0) return;
  // 8- and 16-bit integers (multiUpdateAdd has no vertices for them) add into an int32 copy of
  // the data, wrapped back to the width afterwards: the low bits of the sums are the same
  const narrow = isNarrowInt(dtype);
  const empty = n === 0 || numElements(upd.type.shape) === 0;
  if (!narrow || empty) e.emit(`prog.add(poplar::program::Copy(${e.operand(op, 0)}, ${t}));`);
  if (empty) return;
  const A = numElements(shape.slice(0, axis));
  const B = numElements(shape.slice(axis + 1));
  const D = shape[axis]!;
  const addType: DType = narrow ? 'int32' : dtype;
  checkMultiUpdateAdd(e, addType, [D, A * B], [n, 1, A * B], [n, 1], [0], [1], { dtype: addType, shape: [] });
  const offsets = indexOffsets(op, e, 1, D);
  const into = narrow ? widenToInt32(e, e.operand(op, 0), dtype, shape, ipu, 'scatter_add_int32') : t;
  const updates = narrow ? widenToInt32(e, e.operand(op, 2), dtype, upd.type.shape, ipu, 'scatter_add_updates_int32') : e.operand(op, 2);
  // data [outer, D, inner] -> [D, outer * inner]; updates [outer, n, inner] -> [n, 1, outer * inner]
  const base = `${into}.reshape({${A}, ${D}, ${B}}).dimShuffle({1, 0, 2}).reshape({${D}, ${A * B}})`;
  const u = `${updates}.reshape({${A}, ${n}, ${B}}).dimShuffle({1, 0, 2}).reshape({${n}, 1, ${A * B}})`;
  const scale = e.scalarConstant(addType, 1, ipu);
  const proportion = explicitMemoryProportion(op);
  const plan = proportion === undefined ? 'popops::SlicePlan()' : slicePlan(e, ipu, addType, D, A * B, n, proportion, 'update');
  e.emit(`popops::multiUpdateAdd(${g}, ${base}, ${u}, ${offsets}, ${scale}.reshape({}), {0}, {1}, prog, ${plan}, poplar::OptionFlags(), ${e.debugName('scatter_add')});`);
  if (narrow) emitMap(e, 'cast', dtype, shape, ipu, [{ dtype: 'int32', shape, tensor: () => into }], t, 'scatter_add_wrap');
}

/**
 * A PopLibs embedding plan for a lookup (multiSlice) or an update (multiUpdateAdd) of `lookups`
 * rows of a [entries, rowSize] table, within the given share of tile memory; returns its name.
 */
function slicePlan(e: GraphEmitter, ipu: number, dtype: DType, entries: number, rowSize: number, lookups: number, proportion: number, use: 'slice' | 'update'): string {
  const name = e.local('plan');
  const usage = use === 'slice' ? '{"usedForSlice", "true"}, {"usedForUpdate", "false"}' : '{"usedForSlice", "false"}, {"usedForUpdate", "true"}, {"operationForUpdate", "add"}';
  e.emit(
    `const popops::SlicePlan ${name} = popops::embedding::plan(${e.g(ipu)}, ${deviceType(dtype).poplar}, ${entries}, ${rowSize}, {${lookups}}, {{"availableMemoryProportion", "${proportion}"}, ${usage}});`,
  );
  return name;
}

/** The clamped start of a dynamic slice as a uint32 [1] tensor. */
function dynamicOffset(op: Op, e: GraphEmitter, startOperand: number, max: number): string {
  const ipu = e.ipuOf(op);
  const off = e.newTensor('uint32', [1], ipu, 'dynamic_offset');
  const src = e.operand(op, startOperand);
  emitMap(e, 'clamp_index', 'uint32', [1], ipu, [{ dtype: 'int32', shape: [], tensor: () => src }], off, 'dynamic_offset', { max });
  return off;
}

function lowerDynamicSlice(op: Op, e: GraphEmitter): void {
  const x = op.operands[0]!;
  const ipu = e.ipuOf(op);
  const axis = normalizeAxis(op.attrs['axis'] as number, x.type.shape.length);
  const size = op.attrs['size'] as number;
  const step = op.attrs['step'] as number;
  const out = op.result;
  if (numElements(out.type.shape) === 0) {
    e.newResult(out, ipu);
    return;
  }
  const carrier = sliceCarrier(x.type.dtype);
  checkDynamicSlice(e, 'dynamicSlice', carrier.dtype, x.type.shape, { dtype: 'uint32', shape: [1] }, [axis], [size]);
  const off = dynamicOffset(op, e, 1, x.type.shape[axis]! - size);
  // the window is sliced out whole; a step keeps every step-th of its elements (a view of it)
  const window = [...x.type.shape];
  window[axis] = size;
  e.countResult(x.type.dtype, window, ipu, e.valueLabel(out));
  const sliced = carrier.back(`popops::dynamicSlice(${e.g(ipu)}, ${carrier.view(e.operand(op, 0))}, ${off}, {${axis}}, {${size}}, prog, ${e.debugName(e.valueLabel(out))})`);
  e.define(out, step > 1 ? `${sliced}.subSample(${step}, ${axis})` : sliced, ipu);
}

function lowerDynamicUpdateSlice(op: Op, e: GraphEmitter): void {
  const x = op.operands[0]!;
  const upd = op.operands[1]!;
  const ipu = e.ipuOf(op);
  const axis = normalizeAxis(op.attrs['axis'] as number, x.type.shape.length);
  const size = upd.type.shape[axis]!;
  const t = e.newResult(op.result, ipu);
  if (numElements(x.type.shape) === 0) return;
  e.emit(`prog.add(poplar::program::Copy(${e.operand(op, 0)}, ${t}));`);
  if (numElements(upd.type.shape) === 0) return;
  const carrier = sliceCarrier(x.type.dtype);
  checkDynamicSlice(e, 'dynamicUpdate', carrier.dtype, x.type.shape, { dtype: 'uint32', shape: [1] }, [axis], [size], upd.type.shape);
  const off = dynamicOffset(op, e, 2, x.type.shape[axis]! - size);
  e.emit(`popops::dynamicUpdate(${e.g(ipu)}, ${carrier.view(t)}, ${carrier.view(e.operand(op, 1))}, ${off}, {${axis}}, {${size}}, prog, ${e.debugName('dynamic_update_slice')});`);
}

export const MOVEMENT_LOWERINGS: Record<string, Lowering> = {
  reshape: reshapeTo,
  squeeze: reshapeTo,
  unsqueeze: reshapeTo,
  flatten: reshapeTo,
  transpose: lowerTranspose,
  slice: lowerSlice,
  concat: lowerConcat,
  split: lowerSplit,
  expand: lowerExpand,
  tile: lowerTile,
  pad: lowerPad,
  slice_grad: lowerSliceGrad,
  gather: lowerGather,
  scatter_add: lowerScatterAdd,
  dynamic_slice: lowerDynamicSlice,
  dynamic_update_slice: lowerDynamicUpdateSlice,
};
