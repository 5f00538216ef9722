import fc from 'fast-check';
import { DType, roundToHalf } from '../dtype.js';
import { AttrInput } from '../builder.js';
import { completeAttrs } from '../graph.js';
import { getOpDef } from '../registry.js';
import { Shape, TensorType, numElements } from '../shape.js';
import { Tensor } from '../tensor.js';
import { KERNEL_CTX, buildError, runOp, runOp1 } from '../testing/kernels.js';

/** 0, 1, 2, ... in the given shape. */
function iota(shape: Shape, dtype: DType = 'int32'): Tensor {
  return Tensor.from(dtype, shape, Array.from({ length: numElements(shape) }, (_, i) => i));
}

const f32 = (...shape: number[]): TensorType => ({ dtype: 'float32', shape });

describe('reshape', () => {
  it('keeps the row-major order and infers -1', () => {
    const r = runOp1('reshape', iota([2, 3]), { shape: [3, -1] });
    expect(r.shape).toEqual([3, 2]);
    expect(r.toArray()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(runOp1('reshape', iota([0, 3]), { shape: [-1, 3] }).shape).toEqual([0, 3]);
    expect(runOp1('reshape', iota([1]), { shape: [] }).shape).toEqual([]);
  });
  it('rejects impossible shapes', () => {
    expect(buildError('reshape', [f32(2, 3)], { shape: [4, 2] })).toBe('reshape: cannot reshape [2,3] (6 elements) to [4,2] (8 elements)');
    expect(buildError('reshape', [f32(2, 3)], { shape: [4, -1] })).toBe('reshape: cannot reshape [2,3] (6 elements) to [4,-1]: 6 is not a multiple of 4');
    expect(buildError('reshape', [f32(2, 3)], { shape: [-1, -1] })).toBe('reshape: shape [-1,-1] has more than one -1');
    expect(buildError('reshape', [f32(2, 3)], { shape: [-2, -3] })).toBe('reshape: shape [-2,-3] has a negative dimension -2');
    expect(buildError('reshape', [f32(0, 3)], { shape: [0, -1] })).toMatch(/^reshape: cannot reshape \[0,3\] \(0 elements\) to \[0,-1\]: .*-1 is undetermined/);
  });
});

describe('transpose', () => {
  it('reverses dims by default', () => {
    // [[0,1,2],[3,4,5]]ᵀ = [[0,3],[1,4],[2,5]]
    const r = runOp1('transpose', iota([2, 3]));
    expect(r.shape).toEqual([3, 2]);
    expect(r.toArray()).toEqual([0, 3, 1, 4, 2, 5]);
  });
  it('applies an explicit permutation (result dim i is input dim perm[i])', () => {
    // x[i,j,k] = 12i + 4j + k
    const x = iota([2, 3, 4]);
    const a = runOp1('transpose', x, { perm: [1, 0, 2] });
    expect(a.shape).toEqual([3, 2, 4]);
    expect(a.get(2, 1, 3)).toBe(12 * 1 + 4 * 2 + 3);
    const b = runOp1('transpose', x, { perm: [2, 0, 1] });
    expect(b.shape).toEqual([4, 2, 3]);
    expect(b.get(3, 1, 2)).toBe(12 * 1 + 4 * 2 + 3); // b[k,i,j] = x[i,j,k]
  });
  it('copies every dtype exactly', () => {
    const h = Tensor.from('float16', [2, 2], [roundToHalf(0.1), -0, Infinity, NaN]);
    expect(runOp1('transpose', h).toArray()).toEqual([roundToHalf(0.1), Infinity, -0, NaN]);
    expect(runOp1('transpose', Tensor.from('uint32', [1, 2], [2 ** 32 - 1, 7])).toArray()).toEqual([2 ** 32 - 1, 7]);
    expect(runOp1('transpose', Tensor.from('bool', [2, 1], [1, 0])).toArray()).toEqual([1, 0]);
  });
  it('rejects non-permutations', () => {
    expect(buildError('transpose', [f32(2, 3)], { perm: [0, 0] })).toBe('transpose: perm [0,0] is not a permutation of 0..1 for [2,3]');
    expect(buildError('transpose', [f32(2, 3)], { perm: [0, 1, 2] })).toMatch(/^transpose: perm \[0,1,2\] is not a permutation/);
  });
});

describe('slice', () => {
  const x = iota([10]);
  const sl = (attrs: AttrInput) => runOp1('slice', x, attrs).toArray();
  it('follows ONNX Slice', () => {
    expect(sl({ starts: [2], ends: [7] })).toEqual([2, 3, 4, 5, 6]);
    expect(sl({ starts: [-3], ends: [100] })).toEqual([7, 8, 9]); // -3 → 7; 100 clamps to 10
    expect(sl({ starts: [1], ends: [8], steps: [3] })).toEqual([1, 4, 7]);
    expect(sl({ starts: [5], ends: [2] })).toEqual([]);
    expect(sl({ starts: [20], ends: [30] })).toEqual([]);
  });
  it('walks backwards with negative steps', () => {
    expect(sl({ starts: [8], ends: [2], steps: [-2] })).toEqual([8, 6, 4]); // ceil((8-2)/2) = 3 elements
    // end -100 → -90, clamped to -1: runs down to index 0
    expect(sl({ starts: [-1], ends: [-100], steps: [-1] })).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    // start 100 clamps to 9
    expect(sl({ starts: [100], ends: [-100], steps: [-3] })).toEqual([9, 6, 3, 0]);
    // end -1 means index 9, so nothing lies between 5 and 9 going down
    expect(sl({ starts: [5], ends: [-1], steps: [-1] })).toEqual([]);
    expect(sl({ starts: [2 ** 53], ends: [-(2 ** 53)], steps: [-4] })).toEqual([9, 5, 1]);
    // ONNX clamps a backward start of -12 (→ -2) up to 0, so index 0 is read (Python would give nothing)
    expect(sl({ starts: [-12], ends: [-20], steps: [-1] })).toEqual([0]);
  });
  it('slices chosen axes of a matrix', () => {
    // x = [[0,1,2,3],[4,5,6,7],[8,9,10,11]]; rows 1..2, columns 0 and 2
    const m = iota([3, 4]);
    const r = runOp1('slice', m, { starts: [1, 0], ends: [3, 4], axes: [0, 1], steps: [1, 2] });
    expect(r.shape).toEqual([2, 2]);
    expect(r.toArray()).toEqual([4, 6, 8, 10]);
    const c = runOp1('slice', m, { starts: [1], ends: [3], axes: [-1] });
    expect(c.shape).toEqual([3, 2]);
    expect(c.toArray()).toEqual([1, 2, 5, 6, 9, 10]);
  });
  it('rejects bad attributes', () => {
    expect(buildError('slice', [f32(4)], { starts: [0, 1], ends: [2] })).toMatch(/^slice: starts \[0,1\], ends \[2\].* must have the same length/);
    expect(buildError('slice', [f32(4)], { starts: [0], ends: [2], steps: [0] })).toBe('slice: steps [0] contain 0');
    expect(buildError('slice', [f32(4, 4)], { starts: [0, 0], ends: [2, 2], axes: [1, -1] })).toBe('slice: axes [1,-1] repeat an axis');
    expect(buildError('slice', [f32(4, 4)], { starts: [0], ends: [2], axes: [2] })).toBe('slice: axis 2 is out of range for [4,4] (rank 2)');
  });
});

describe('concat and split', () => {
  const a = Tensor.from('float32', [2, 2], [1, 2, 3, 4]);
  it('concatenates along any axis', () => {
    const b = Tensor.from('float32', [2, 1], [5, 6]);
    // [[1,2],[3,4]] ++ [[5],[6]] along columns = [[1,2,5],[3,4,6]]
    const r = runOp('concat', [a, b], { axis: -1 })[0]!;
    expect(r.shape).toEqual([2, 3]);
    expect(r.toArray()).toEqual([1, 2, 5, 3, 4, 6]);
    const c = Tensor.from('float32', [1, 2], [7, 8]);
    expect(runOp('concat', [a, c, Tensor.zeros('float32', [0, 2])], { axis: 0 })[0]!.toArray()).toEqual([1, 2, 3, 4, 7, 8]);
    expect(runOp('concat', [a], { axis: 1 })[0]!.toArray()).toEqual([1, 2, 3, 4]);
  });
  it('rejects mismatched operands', () => {
    expect(buildError('concat', [f32(2, 2), f32(3, 1)], { axis: 1 })).toBe(
      'concat: operand 1 has shape [3,1] but operand 0 has [2,2]: all dims except axis 1 must match',
    );
    expect(buildError('concat', [f32(2), { dtype: 'int32', shape: [2] }], { axis: 0 })).toMatch(/^concat: operand 1 is i32\[2\] but operand 0 is f32\[2\]: dtypes differ/);
    expect(buildError('concat', [f32(), f32()], { axis: 0 })).toMatch(/^concat: cannot concatenate scalars/);
    expect(buildError('concat', [f32(2)], { axis: 1 })).toBe('concat: axis 1 is out of range for [2] (rank 1)');
    expect(buildError('concat', [], { axis: 0 })).toMatch(/^concat: expects at least 1 operand/);
  });
  it('splits into pieces of the given sizes', () => {
    const [p, q] = runOp('split', [iota([5])], { sizes: [2, 3] });
    expect(p!.toArray()).toEqual([0, 1]);
    expect(q!.toArray()).toEqual([2, 3, 4]);
    // [[0,1,2],[3,4,5]] cut into columns {0}, {}, {1,2}
    const parts = runOp('split', [iota([2, 3])], { axis: -1, sizes: [1, 0, 2] });
    expect(parts.map((t) => t.shape)).toEqual([[2, 1], [2, 0], [2, 2]]);
    expect(parts.map((t) => t.toArray())).toEqual([[0, 3], [], [1, 2, 4, 5]]);
  });
  it('rejects sizes that do not cover the axis', () => {
    expect(buildError('split', [f32(5)], { sizes: [2, 2] })).toBe('split: sizes [2,2] sum to 4 but axis 0 of [5] has size 5');
    expect(buildError('split', [f32(5)], { sizes: [6, -1] })).toBe('split: sizes [6,-1] contain a negative size');
    expect(buildError('split', [f32(5)], { sizes: [] })).toBe('split: sizes must not be empty');
  });
});

describe('gather', () => {
  const x = Tensor.from('float32', [3, 2], [1, 2, 3, 4, 5, 6]);
  const g = (ind: Tensor, axis = 0) => runOp('gather', [x, ind], { axis })[0]!;
  it('picks rows by index, keeping the index shape', () => {
    const r = g(Tensor.from('int32', [2, 2], [0, 1, 1, 2]));
    expect(r.shape).toEqual([2, 2, 2]);
    expect(r.toArray()).toEqual([1, 2, 3, 4, 3, 4, 5, 6]);
  });
  it('wraps negative indices and gathers on other axes', () => {
    expect(g(Tensor.from('int32', [2], [-1, 0])).toArray()).toEqual([5, 6, 1, 2]); // row -1 = row 2
    const col = g(Tensor.from('int32', [1], [1]), 1);
    expect(col.shape).toEqual([3, 1]);
    expect(col.toArray()).toEqual([2, 4, 6]);
    const s = g(Tensor.scalar('int32', -2), -1); // column -2 = column 0; a scalar index drops the axis
    expect(s.shape).toEqual([3]);
    expect(s.toArray()).toEqual([1, 3, 5]);
  });
  it('throws a clear error for out-of-range indices', () => {
    const def = getOpDef('gather')!;
    const attrs = completeAttrs(def, {});
    expect(() => def.kernel([x, Tensor.from('int32', [1], [3])], attrs, KERNEL_CTX)).toThrow('gather: index 3 is out of range for axis 0 of size 3 in [3,2]');
    expect(() => def.kernel([x, Tensor.from('int32', [1], [-4])], attrs, KERNEL_CTX)).toThrow(/^gather: index -4 is out of range/);
  });
  it('requires int32 indices and does not differentiate them', () => {
    expect(buildError('gather', [f32(3), f32(2)])).toBe('gather: indices must be int32, got f32[2]');
    expect(buildError('gather', [f32(), { dtype: 'int32', shape: [] }])).toBe('gather: cannot gather from a scalar');
    expect(getOpDef('gather')!.operands[1]!.differentiable).toBe(false);
  });
});

describe('squeeze, unsqueeze, flatten', () => {
  const x = iota([1, 3, 1, 2]);
  it('squeezes all or given size-1 dims', () => {
    expect(runOp1('squeeze', x).shape).toEqual([3, 2]);
    expect(runOp1('squeeze', x, { axes: [-2] }).shape).toEqual([1, 3, 2]);
    expect(runOp1('squeeze', x, { axes: [0, 2] }).toArray()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(buildError('squeeze', [f32(1, 3, 1, 2)], { axes: [1] })).toBe('squeeze: cannot squeeze axis 1 of size 3 in [1,3,1,2]');
  });
  it('unsqueezes at positions of the result', () => {
    const y = iota([3, 2]);
    expect(runOp1('unsqueeze', y, { axes: [0] }).shape).toEqual([1, 3, 2]);
    expect(runOp1('unsqueeze', y, { axes: [-1] }).shape).toEqual([3, 2, 1]);
    expect(runOp1('unsqueeze', y, { axes: [1, 3] }).shape).toEqual([3, 1, 2, 1]);
    expect(runOp1('unsqueeze', y, { axes: [0, -1] }).shape).toEqual([1, 3, 2, 1]);
    expect(runOp1('unsqueeze', Tensor.scalar('float32', 2), { axes: [0] }).toArray()).toEqual([2]);
    expect(buildError('unsqueeze', [f32(3, 2)], { axes: [3] })).toBe('unsqueeze: axis 3 is out of range for the rank-3 result of unsqueezing [3,2] by axes [3]');
    expect(buildError('unsqueeze', [f32(3, 2)], { axes: [1, -3] })).toBe('unsqueeze: axes [1,-3] repeat an axis');
  });
  it('flattens to two dims around an axis', () => {
    const z = iota([2, 3, 4]);
    expect(runOp1('flatten', z).shape).toEqual([2, 12]);
    expect(runOp1('flatten', z, { axis: 0 }).shape).toEqual([1, 24]);
    expect(runOp1('flatten', z, { axis: 3 }).shape).toEqual([24, 1]);
    expect(runOp1('flatten', z, { axis: -1 }).shape).toEqual([6, 4]);
    expect(buildError('flatten', [f32(2, 3, 4)], { axis: 4 })).toBe('flatten: axis 4 is out of range [-3, 3] for [2,3,4]');
  });
});

describe('expand and tile', () => {
  it('broadcasts in both directions', () => {
    const col = Tensor.from('float32', [3, 1], [1, 2, 3]);
    const r = runOp1('expand', col, { shape: [2, 1, 2] }); // [3,1] with [2,1,2] → [2,3,2]
    expect(r.shape).toEqual([2, 3, 2]);
    expect(r.toArray()).toEqual([1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3]);
    expect(runOp1('expand', iota([2, 3]), { shape: [1] }).shape).toEqual([2, 3]); // target dims of 1 keep x's
    expect(runOp1('expand', col, { shape: [1, 4] }).shape).toEqual([3, 4]);
    expect(runOp1('expand', Tensor.scalar('bool', 1), { shape: [2] }).toArray()).toEqual([1, 1]);
    expect(buildError('expand', [f32(2, 3)], { shape: [4] })).toBe('expand: cannot expand [2,3] to [4]: dimension 3 does not broadcast with 4');
    expect(buildError('expand', [f32(2)], { shape: [-1] })).toBe('expand: shape [-1] has a negative dimension -1');
  });
  it('tiles the whole tensor', () => {
    const m = Tensor.from('int32', [2, 2], [1, 2, 3, 4]);
    expect(runOp1('tile', m, { repeats: [1, 2] }).toArray()).toEqual([1, 2, 1, 2, 3, 4, 3, 4]);
    const t = runOp1('tile', m, { repeats: [2, 1] });
    expect(t.shape).toEqual([4, 2]);
    expect(t.toArray()).toEqual([1, 2, 3, 4, 1, 2, 3, 4]);
    expect(runOp1('tile', m, { repeats: [0, 1] }).shape).toEqual([0, 2]);
    expect(buildError('tile', [f32(2, 2)], { repeats: [2] })).toBe('tile: repeats [2] has 1 entries but [2,2] has rank 2');
    expect(buildError('tile', [f32(2)], { repeats: [-1] })).toBe('tile: repeats [-1] contain a negative count -1');
  });
});

describe('pad', () => {
  const x = Tensor.from('float32', [3], [1, 2, 3]);
  it('pads in each mode', () => {
    expect(runOp1('pad', x, { pads: [2, 1], value: 9 }).toArray()).toEqual([9, 9, 1, 2, 3, 9]);
    // reflect mirrors without repeating the edge: ... 3 2 | 1 2 3 | 2 ...
    expect(runOp1('pad', x, { pads: [2, 1], mode: 'reflect' }).toArray()).toEqual([3, 2, 1, 2, 3, 2]);
    expect(runOp1('pad', x, { pads: [2, 1], mode: 'edge' }).toArray()).toEqual([1, 1, 1, 2, 3, 3]);
  });
  it('takes all begins, then all ends', () => {
    // begin: 1 row above, 0 columns left; end: 0 rows below, 1 column right
    const m = Tensor.from('float32', [2, 2], [1, 2, 3, 4]);
    const r = runOp1('pad', m, { pads: [1, 0, 0, 1] });
    expect(r.shape).toEqual([3, 3]);
    expect(r.toArray()).toEqual([0, 0, 0, 1, 2, 0, 3, 4, 0]);
  });
  it('crops with negative pads and fills integers exactly', () => {
    expect(runOp1('pad', Tensor.from('float32', [4], [1, 2, 3, 4]), { pads: [-1, 1] }).toArray()).toEqual([2, 3, 4, 0]);
    expect(runOp1('pad', Tensor.from('int32', [2], [1, 2]), { pads: [1, 0], value: -1 }).toArray()).toEqual([-1, 1, 2]);
    expect(runOp1('pad', Tensor.from('bool', [1], [0]), { pads: [0, 1], value: 1 }).toArray()).toEqual([0, 1]);
    expect(runOp1('pad', Tensor.zeros('float32', [0]), { pads: [1, 1], value: 5 }).toArray()).toEqual([5, 5]);
  });
  it('rejects bad pads', () => {
    expect(buildError('pad', [f32(3)], { pads: [1] })).toBe('pad: pads [1] has 1 entries but [3] needs 2 (all begins, then all ends)');
    expect(buildError('pad', [f32(3)], { pads: [3, 0], mode: 'reflect' })).toBe('pad: reflect pads [3,0] must be smaller than the size 3 of axis 0 of [3]');
    expect(buildError('pad', [f32(0)], { pads: [1, 0], mode: 'edge' })).toBe('pad: edge pads [1,0] need a non-empty axis 0 of [0]');
    expect(buildError('pad', [f32(3)], { pads: [-2, -2] })).toBe('pad: pads [-2,-2] remove more than the 3 elements of axis 0 of [3]');
    expect(buildError('pad', [f32(3)], { pads: [1, 1], mode: 'wrap' })).toMatch(/^pad: attribute 'mode' must be one of/);
  });
});

describe('dynamic_slice', () => {
  const x = iota([5]);
  const ds = (start: number, size = 3, t: Tensor = x, axis = 0) => runOp('dynamic_slice', [t, Tensor.scalar('int32', start)], { axis, size })[0]!;
  it('clamps the start to [0, dim - size]', () => {
    expect(ds(1).toArray()).toEqual([1, 2, 3]);
    expect(ds(4).toArray()).toEqual([2, 3, 4]); // 4 clamps to 5 - 3 = 2
    expect(ds(-3).toArray()).toEqual([0, 1, 2]);
    expect(ds(2, 0).shape).toEqual([0]);
    // [[0,1,2],[3,4,5]], two columns from 1
    const m = ds(1, 2, iota([2, 3]), -1);
    expect(m.shape).toEqual([2, 2]);
    expect(m.toArray()).toEqual([1, 2, 4, 5]);
  });
  it('with a step keeps every step-th element of the window: x[start : start + size : step]', () => {
    const y = iota([7]);
    const step = (start: number, size: number, k: number) => runOp('dynamic_slice', [y, Tensor.scalar('int32', start)], { axis: 0, size, step: k })[0]!;
    expect(step(1, 5, 2).toArray()).toEqual([1, 3, 5]);
    expect(step(0, 4, 3).toArray()).toEqual([0, 3]); // ceil(4 / 3) elements
    expect(step(6, 4, 2).toArray()).toEqual([3, 5]); // 6 clamps to 7 - 4 = 3
    // along the last axis of [[0..3],[4..7]]
    expect(runOp('dynamic_slice', [iota([2, 4]), Tensor.scalar('int32', 0)], { axis: 1, size: 4, step: 2 })[0]!.toArray()).toEqual([0, 2, 4, 6]);
    expect(buildError('dynamic_slice', [f32(5), { dtype: 'int32', shape: [] }], { axis: 0, size: 2, step: 0 })).toBe('dynamic_slice: step 0 must be at least 1');
  });
  it('validates the start operand and the size', () => {
    const i32 = (...shape: number[]): TensorType => ({ dtype: 'int32', shape });
    expect(buildError('dynamic_slice', [f32(5), i32(1)], { axis: 0, size: 2 })).toBe('dynamic_slice: start must be an int32 scalar, got i32[1]');
    expect(buildError('dynamic_slice', [f32(5), f32()], { axis: 0, size: 2 })).toBe('dynamic_slice: start must be an int32 scalar, got f32[]');
    expect(buildError('dynamic_slice', [f32(5), i32()], { axis: 0, size: 6 })).toBe('dynamic_slice: size 6 does not fit axis 0 of size 5 in [5]');
    expect(buildError('dynamic_slice', [f32(5), i32()], { size: 2 })).toBe("dynamic_slice: missing required attribute 'axis'");
    expect(getOpDef('dynamic_slice')!.operands[1]!.differentiable).toBe(false);
  });
});

// ---- properties: inferred shapes agree with kernels ----

const shapeArb = (maxRank = 4, maxDim = 4) => fc.array(fc.integer({ min: 0, max: maxDim }), { minLength: 0, maxLength: maxRank });
const dtypeArb = fc.constantFrom<DType>('float32', 'float16', 'int32', 'uint32', 'bool');

function filled(dtype: DType, shape: Shape): Tensor {
  return Tensor.from(dtype, shape, Array.from({ length: numElements(shape) }, (_, i) => (dtype === 'bool' ? i % 2 : i)));
}

/**
 * Python's slice semantics (PySlice_AdjustIndices), written independently of the kernel, with the
 * one place ONNX differs: stepping backwards, a start before the beginning clamps to 0 (ONNX spec
 * and its shape inference) where Python gives an empty slice.
 */
function onnxSliceOracle(n: number, start: number, stop: number, step: number): number[] {
  const adjust = (v: number, lo: number, hi: number) => (v < 0 ? Math.max(lo, v + n) : Math.min(v, hi));
  const out: number[] = [];
  if (step > 0) {
    for (let i = adjust(start, 0, n); i < adjust(stop, 0, n); i += step) out.push(i);
  } else if (n > 0) {
    for (let i = adjust(start, 0, n - 1); i > adjust(stop, -1, n - 1); i += step) out.push(i);
  }
  return out;
}

describe('movement properties', () => {
  it('slice agrees with an independent ONNX Slice oracle', () => {
    const b = fc.integer({ min: -8, max: 8 });
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 6 }), b, b, fc.integer({ min: -4, max: 4 }).filter((s) => s !== 0), (n, start, end, step) => {
        const r = runOp1('slice', iota([n]), { starts: [start], ends: [end], steps: [step] });
        expect(r.toArray()).toEqual(onnxSliceOracle(n, start, end, step));
      }),
    );
  });

  it('slice, transpose, tile, expand, pad, squeeze, unsqueeze, flatten and reshape infer the kernel shape', () => {
    const caseArb = fc.tuple(shapeArb(), dtypeArb).chain(([shape, dtype]) => {
      const rank = shape.length;
      const perDim = <T>(arb: fc.Arbitrary<T>) => fc.tuple(...shape.map(() => arb)).map((xs) => xs as T[]);
      const cases: fc.Arbitrary<[string, AttrInput]>[] = [
        fc
          .tuple(perDim(fc.integer({ min: -6, max: 6 })), perDim(fc.integer({ min: -6, max: 6 })), perDim(fc.integer({ min: -3, max: 3 }).filter((s) => s !== 0)))
          .map(([starts, ends, steps]) => ['slice', { starts, ends, axes: shape.map((_, i) => i), steps }]),
        fc.shuffledSubarray(shape.map((_, i) => i), { minLength: rank, maxLength: rank }).map((perm) => ['transpose', { perm }]),
        perDim(fc.integer({ min: 0, max: 3 })).map((repeats) => ['tile', { repeats }]),
        perDim(fc.constantFrom(1, 3)).map((target) => ['expand', { shape: target.map((t, i) => (shape[i] === 1 ? t : shape[i]!)) }]),
        fc
          .tuple(perDim(fc.integer({ min: -1, max: 3 })), perDim(fc.integer({ min: -1, max: 3 })), fc.constantFrom('constant', 'reflect', 'edge'))
          .map(([b, e, mode]) => {
            // keep pads valid for the mode: reflect needs pad < dim, edge needs a non-empty dim
            const fitPad = (p: number, d: number) => {
              const q = Math.max(p, -Math.floor(d / 2));
              return mode === 'reflect' ? Math.min(q, Math.max(d - 1, 0)) : mode === 'edge' && d === 0 ? 0 : q;
            };
            return ['pad', { pads: [...b.map((p, i) => fitPad(p, shape[i]!)), ...e.map((p, i) => fitPad(p, shape[i]!))], mode, value: 2 }];
          }),
        fc.constant(['squeeze', {}]),
        fc.integer({ min: -rank - 1, max: rank }).map((a) => ['unsqueeze', { axes: [a] }]),
        fc.integer({ min: -rank, max: rank }).map((a) => ['flatten', { axis: a }]),
        fc.constant(['reshape', { shape: [numElements(shape)] }]),
        fc.constant(['reshape', { shape: [...shape].reverse().map((d, i) => (i === 0 && numElements(shape) > 0 ? -1 : d)) }]),
      ];
      return fc.tuple(fc.constant(shape), fc.constant(dtype), fc.oneof(...cases));
    });
    fc.assert(
      fc.property(caseArb, ([shape, dtype, [op, attrs]]) => {
        runOp1(op, filled(dtype, shape), attrs);
      }),
      { numRuns: 300 },
    );
  });

  it('concat, split, gather and dynamic_slice infer the kernel shape', () => {
    const caseArb = fc.tuple(shapeArb(3, 4).filter((s) => s.length > 0), dtypeArb).chain(([shape, dtype]) =>
      fc.record({
        shape: fc.constant(shape),
        dtype: fc.constant(dtype),
        axis: fc.integer({ min: -shape.length, max: shape.length - 1 }),
        extra: fc.integer({ min: 0, max: 3 }),
        cut: fc.integer({ min: 0, max: 4 }),
        indexShape: shapeArb(2, 3),
        start: fc.integer({ min: -5, max: 5 }),
      }),
    );
    fc.assert(
      fc.property(caseArb, ({ shape, dtype, axis, extra, cut, indexShape, start }) => {
        const a = axis < 0 ? axis + shape.length : axis;
        const x = filled(dtype, shape);
        const other = [...shape];
        other[a] = extra;
        const cat = runOp('concat', [x, filled(dtype, other)], { axis })[0]!;
        expect(cat.shape[a]).toBe(shape[a]! + extra);
        const first = Math.min(cut, shape[a]!);
        const parts = runOp('split', [x], { axis, sizes: [first, shape[a]! - first] });
        // splitting then concatenating gives the input back
        expect(runOp('concat', parts, { axis })[0]!.toArray()).toEqual(x.toArray());
        if (shape[a]! > 0) {
          const n = numElements(indexShape);
          const ind = Tensor.from('int32', indexShape, Array.from({ length: n }, (_, i) => (i % (2 * shape[a]!)) - shape[a]!));
          runOp('gather', [x, ind], { axis });
        }
        runOp('dynamic_slice', [x, Tensor.scalar('int32', start)], { axis, size: first });
      }),
      { numRuns: 200 },
    );
  });
});
