import { Tensor, Value, isFloat, numElements, stridesOf } from '@tilegraph/ir';
import { Emitter, NodeContext } from './context.js';
import { cumsum } from './decompose.js';

/**
 * Ops whose output size depends on the data (NonZero, NonMaxSuppression, Unique). IPU programs
 * have static shapes, so each output is padded to a bound the user gives (maxOutputs), and a
 * count of the valid entries is added as a graph output. Each op is a small graph of IR ops:
 * entries are ranked by comparing all pairs, and slot r of the output is gathered from the entry
 * of rank r (a masked sum), so no data-dependent indexing is needed.
 */

/** Pairwise tables (n × n) are limited to this many entries. */
const MAX_PAIRS = 1 << 24;

function checkPairs(c: NodeContext, n: number, what: string): void {
  if (n * n > MAX_PAIRS) c.unsupported(`${what} compares ${n} entries pairwise, more than the importer builds (${Math.floor(Math.sqrt(MAX_PAIRS))})`);
}

/** 0, 1, ..., n-1 as int32 with shape `shape` (n = its element count). */
function iota(e: Emitter, shape: readonly number[]): Value {
  const n = numElements(shape);
  return e.constant(Tensor.from('int32', shape, [...Array(n).keys()]));
}

/**
 * out[r, ...] = the row of `rows` [n, ...] whose `slot` [n] (int32) equals r where `take` [n]
 * holds, else 0; for r < bound. Exact for every dtype (a masked sum).
 */
function gatherSlots(e: Emitter, take: Value, slot: Value, rows: Value, bound: number): Value {
  const n = take.type.shape[0]!;
  const extra = rows.type.shape.length - 1;
  const slots = iota(e, [bound, 1]);
  const sel = e.op('and', [e.op('equal', [e.op('reshape', [slot], { shape: [1, n] }), slots]), e.op('reshape', [take], { shape: [1, n] })]);
  const sel3 = e.op('reshape', [sel], { shape: [bound, n, ...new Array<number>(extra).fill(1)] });
  const rows3 = e.op('unsqueeze', [rows], { axes: [0] });
  return e.op('reduce_sum', [e.op('where', [sel3, rows3, e.like(rows, 0)])], { axes: [1], keepdims: false });
}

/** `v` [bound, ...] with entries of slots >= count replaced by `fill`. */
function padAfter(e: Emitter, v: Value, count: Value, fill: number): Value {
  const bound = v.type.shape[0]!;
  const valid = e.op('less', [iota(e, [bound, ...v.type.shape.slice(1).map(() => 1)]), count]);
  return e.op('where', [valid, v, e.like(v, fill)]);
}

function countOf(e: Emitter, take: Value): Value {
  return e.op('reduce_sum', [e.cast(take, 'int32')], { axes: [0], keepdims: false });
}

export function nonZero(c: NodeContext): Value {
  const e = c.e;
  const x = c.input(0);
  const shape = [...x.type.shape];
  const n = numElements(shape);
  const rank = shape.length;
  const bound = c.outputBound(0, [1], 'the number of non-zero elements');
  checkPairs(c, n, 'NonZero');
  const flat = e.op('reshape', [x], { shape: [n] });
  const take = x.type.dtype === 'bool' ? flat : e.op('not', [e.op('equal', [flat, e.like(flat, 0)])]);
  const slot = cumsum(c, e.cast(take, 'int32'), 0, true, false);
  // coordinates of each element, row-major
  const strides = stridesOf(shape);
  const coords = new Array<number>(n * rank);
  for (let q = 0; q < n; q++) for (let d = 0; d < rank; d++) coords[q * rank + d] = Math.floor(q / strides[d]!) % shape[d]!;
  const table = e.constant(Tensor.from('int32', [n, rank], coords));
  const count = countOf(e, take);
  c.countOutput(0, count);
  const out = padAfter(e, gatherSlots(e, take, slot, table, bound), count, -1);
  return e.op('transpose', [out], { perm: [1, 0] });
}

/** Boxes as [ymin, xmin, ymax, xmax] slices of [B, N]; center_point_box=1 gives [xc, yc, w, h]. */
function corners(e: Emitter, boxes: Value, centered: boolean): Value[] {
  const [b, n] = boxes.type.shape as [number, number];
  const col = (k: number) => e.op('reshape', [e.op('slice', [boxes], { starts: [k], ends: [k + 1], axes: [2] })], { shape: [b, n] });
  if (centered) {
    const [xc, yc, w, h] = [col(0), col(1), col(2), col(3)];
    const hw = e.mul(w, e.like(w, 0.5));
    const hh = e.mul(h, e.like(h, 0.5));
    return [e.sub(yc, hh), e.sub(xc, hw), e.add(yc, hh), e.add(xc, hw)];
  }
  const [y1, x1, y2, x2] = [col(0), col(1), col(2), col(3)];
  return [e.op('min', [y1, y2]), e.op('min', [x1, x2]), e.op('max', [y1, y2]), e.op('max', [x1, x2])];
}

/**
 * Whether box j suppresses box i, [B, N(i), N(j)] as float32 0/1: their IoU exceeds the threshold
 * and both have positive area (the specification's reference).
 */
function suppression(e: Emitter, boxes: Value, centered: boolean, iouThreshold: Value): Value {
  const [b, n] = boxes.type.shape as [number, number];
  const [y0, x0, y1, x1] = corners(e, boxes, centered);
  const rows = (v: Value) => e.op('reshape', [v], { shape: [b, n, 1] });
  const cols = (v: Value) => e.op('reshape', [v], { shape: [b, 1, n] });
  const zero = e.like(y0!, 0);
  const overlap = (lo: Value, hi: Value) => e.op('max', [e.sub(e.op('min', [rows(hi), cols(hi)]), e.op('max', [rows(lo), cols(lo)])), zero]);
  const inter = e.mul(overlap(y0!, y1!), overlap(x0!, x1!));
  const area = e.mul(e.sub(y1!, y0!), e.sub(x1!, x0!));
  const union = e.sub(e.add(rows(area), cols(area)), inter);
  const positive = (v: Value) => e.op('greater', [v, zero]);
  const valid = e.op('and', [e.op('and', [positive(inter), positive(union)]), e.op('and', [positive(rows(area)), positive(cols(area))])]);
  const iou = e.div(inter, e.op('where', [positive(union), union, e.like(union, 1)]));
  return e.cast(e.op('and', [valid, e.op('greater', [iou, iouThreshold])]), 'float32');
}

/** An optional scalar input as a float32 scalar value, or `def`. */
function scalarInput(c: NodeContext, i: number, def: number): Value {
  const v = c.optInput(i);
  if (!v) return c.e.scalar('float32', def);
  if (numElements(v.type.shape) !== 1) c.fail(`input ${i} must hold one value, got shape [${v.type.shape.join(',')}]`);
  return c.e.op('reshape', [c.e.cast(v, 'float32')], { shape: [] });
}

/** Greedy steps the importer unrolls per class (one per box). */
const MAX_NMS_BOXES = 1024;

export function nonMaxSuppression(c: NodeContext): Value {
  const e = c.e;
  const boxes = c.input(0);
  const scores = c.input(1);
  if (boxes.type.shape.length !== 3 || boxes.type.shape[2] !== 4) c.fail(`boxes must be [batches, boxes, 4], got [${boxes.type.shape.join(',')}]`);
  const [nb, n] = boxes.type.shape as [number, number];
  if (scores.type.shape.length !== 3 || scores.type.shape[0] !== nb || scores.type.shape[2] !== n) {
    c.fail(`scores must be [${nb}, classes, ${n}], got [${scores.type.shape.join(',')}]`);
  }
  if (!isFloat(boxes.type.dtype) || !isFloat(scores.type.dtype)) c.fail(`boxes and scores must be float tensors`);
  const nc = scores.type.shape[1]!;
  if (n > MAX_NMS_BOXES) c.unsupported(`${n} boxes per class are more than the importer unrolls (${MAX_NMS_BOXES})`);
  const bound = c.outputBound(0, [0], 'the number of selected boxes');
  checkPairs(c, nb * nc * n, 'NonMaxSuppression');
  const centered = c.int('center_point_box', 0) !== 0;
  const maxPerClass = scalarInput(c, 2, 0);
  const iouThreshold = scalarInput(c, 3, 0);
  const f32 = (v: Value) => e.cast(v, 'float32');
  const s = f32(scores);
  // rank of each box within its class: higher score first, the lower index on ties
  const si = e.op('reshape', [s], { shape: [nb, nc, n, 1] });
  const sj = e.op('reshape', [s], { shape: [nb, nc, 1, n] });
  const earlier = Tensor.zeros('bool', [n, n]);
  for (let i = 0; i < n; i++) for (let j = 0; j < i; j++) earlier.data[i * n + j] = 1;
  const before = e.op('or', [e.op('greater', [sj, si]), e.op('and', [e.op('equal', [sj, si]), e.constant(earlier)])]);
  const rank = e.op('reduce_sum', [e.cast(before, 'int32')], { axes: [-1], keepdims: false }); // [B, C, N]
  // P[t, i] = 1 where box i has rank t: sorts by P @ v
  const perm = f32(e.op('equal', [e.op('reshape', [rank], { shape: [nb, nc, 1, n] }), iota(e, [n, 1])])); // [B, C, N(t), N(i)]
  const permT = e.op('transpose', [perm], { perm: [0, 1, 3, 2] });
  const sup = e.op('reshape', [suppression(e, f32(boxes), centered, iouThreshold)], { shape: [nb, 1, n, n] });
  const supSorted = e.op('matmul', [e.op('matmul', [perm, sup]), permT]); // [B, C, N, N] in rank order
  const sorted = (v: Value) => e.op('reshape', [e.op('matmul', [perm, e.op('reshape', [v], { shape: [nb, nc, n, 1] })])], { shape: [nb, nc, n] });
  const passes = f32(e.op('greater', [sorted(s), c.hasInput(4) ? scalarInput(c, 4, 0) : e.scalar('float32', -Infinity)]));
  // greedy, in rank order: a box is kept when it passes the score threshold, no kept box before it
  // suppresses it, and fewer than max_output_boxes_per_class were kept before it
  const kept: Value[] = [];
  const at = (v: Value, t: number) => e.op('slice', [v], { starts: [t], ends: [t + 1], axes: [2] }); // [B, C, 1]
  for (let t = 0; t < n; t++) {
    let keep = e.mul(at(passes, t), e.op('cast', [e.op('greater', [maxPerClass, e.scalar('float32', 0)])], { to: 'float32' }));
    if (t > 0) {
      const prior = kept.length === 1 ? kept[0]! : e.op('concat', kept, { axis: 2 }); // [B, C, t]
      const row = e.op('reshape', [e.op('slice', [supSorted], { starts: [t, 0], ends: [t + 1, t], axes: [2, 3] })], { shape: [nb, nc, t] });
      const suppressed = e.op('reduce_max', [e.mul(prior, row)], { axes: [2], keepdims: true });
      const under = f32(e.op('less', [e.op('reduce_sum', [prior], { axes: [2], keepdims: true }), maxPerClass]));
      keep = e.mul(e.mul(keep, e.sub(e.like(suppressed, 1), suppressed)), under);
    }
    kept.push(keep);
  }
  const keepAll = e.op('greater', [e.op('reshape', [kept.length === 1 ? kept[0]! : e.op('concat', kept, { axis: 2 })], { shape: [nb * nc * n] }), e.scalar('float32', 0.5)]);
  // (batch, class, box index) of each rank-ordered entry
  const boxOf = e.cast(e.op('matmul', [perm, f32(iota(e, [n, 1]))]), 'int32'); // [B, C, N, 1]
  const batchClass = new Array<number>(nb * nc * n * 2);
  for (let q = 0; q < nb * nc * n; q++) {
    batchClass[q * 2] = Math.floor(q / (nc * n));
    batchClass[q * 2 + 1] = Math.floor(q / n) % nc;
  }
  const table = e.op('concat', [e.constant(Tensor.from('int32', [nb * nc * n, 2], batchClass)), e.op('reshape', [boxOf], { shape: [nb * nc * n, 1] })], { axis: 1 });
  const slot = cumsum(c, e.cast(keepAll, 'int32'), 0, true, false);
  const count = countOf(e, keepAll);
  c.countOutput(0, count);
  return padAfter(e, gatherSlots(e, keepAll, slot, table, bound), count, -1);
}

export function unique(c: NodeContext): Value[] {
  const e = c.e;
  const x = c.input(0);
  const shape = [...x.type.shape];
  const sortedOut = c.int('sorted', 1) !== 0;
  const axisAttr = c.has('axis') ? c.int('axis') : undefined;
  const axis = axisAttr === undefined ? undefined : axisAttr < 0 ? axisAttr + shape.length : axisAttr;
  if (axis !== undefined && (axis < 0 || axis >= shape.length)) c.fail(`axis ${axisAttr} is out of range for rank ${shape.length}`);
  const bound = c.outputBound(0, [axis ?? 0, 0, undefined, 0], 'the number of unique values');
  // rows [n, m]: the elements (no axis) or the slices along the axis
  const perm = axis === undefined ? [] : [axis, ...shape.keys()].filter((d, i) => i === 0 || d !== axis);
  const moved = axis === undefined ? x : e.op('transpose', [x], { perm });
  const n = axis === undefined ? numElements(shape) : shape[axis]!;
  const rest = axis === undefined ? [] : perm.slice(1).map((d) => shape[d]!);
  const m = numElements(rest);
  checkPairs(c, n * Math.max(m, 1), 'Unique');
  const rows = e.op('reshape', [moved], { shape: [n, m] });
  const ri = e.op('reshape', [rows], { shape: [n, 1, m] });
  const rj = e.op('reshape', [rows], { shape: [1, n, m] });
  const differs = e.cast(e.op('not', [e.op('equal', [ri, rj])]), 'int32'); // [n(i), n(j), m]
  const same = e.op('equal', [e.op('reduce_max', [differs], { axes: [2], keepdims: false }), e.scalar('int32', 0)]); // [n, n]
  const earlier = Tensor.zeros('bool', [n, n]);
  for (let i = 0; i < n; i++) for (let j = 0; j < i; j++) earlier.data[i * n + j] = 1;
  const lower = e.constant(earlier);
  const anyOf = (v: Value) => e.op('greater', [e.op('reduce_sum', [e.cast(v, 'int32')], { axes: [1], keepdims: false }), e.scalar('int32', 0)]);
  const first = e.op('not', [anyOf(e.op('and', [same, lower]))]); // [n]: the first of its kind
  const firstJ = e.op('reshape', [first], { shape: [1, n] });
  let precedes: Value; // [n(i), n(j)]: entry j's value comes before entry i's in Y
  if (sortedOut) {
    // lexicographic: the first differing position decides
    const undecided = e.op('equal', [cumsum(c, differs, 2, true, false), e.scalar('int32', 0)]);
    precedes = anyOf(e.op('reshape', [e.op('and', [undecided, e.op('less', [rj, ri])])], { shape: [n * n, m] }));
    precedes = e.op('reshape', [precedes], { shape: [n, n] });
  } else {
    // order of first occurrence: j is a first entry before the first entry of i's kind
    const firstOfI = e.op('reduce_sum', [e.op('where', [e.op('and', [same, firstJ]), iota(e, [1, n]), e.scalar('int32', 0)])], { axes: [1], keepdims: true });
    precedes = e.op('less', [iota(e, [1, n]), firstOfI]);
  }
  const slot = e.op('reduce_sum', [e.cast(e.op('and', [precedes, firstJ]), 'int32')], { axes: [1], keepdims: false }); // [n]
  const count = countOf(e, first);
  c.countOutput(0, count);
  let y = padAfter(e, gatherSlots(e, first, slot, rows, bound), count, 0); // [bound, m]
  if (axis === undefined) {
    y = e.op('reshape', [y], { shape: [bound] });
  } else {
    const inverse = perm.map((_, i) => perm.indexOf(i));
    y = e.op('transpose', [e.op('reshape', [y], { shape: [bound, ...rest] })], { perm: inverse });
  }
  const indices = padAfter(e, gatherSlots(e, first, slot, iota(e, [n]), bound), count, -1);
  const all = e.op('equal', [e.op('reshape', [slot], { shape: [1, n] }), iota(e, [bound, 1])]);
  const counts = e.op('reduce_sum', [e.cast(all, 'int32')], { axes: [1], keepdims: false });
  return [y, indices, slot, counts];
}
