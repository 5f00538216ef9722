import fc from 'fast-check';
import { getOpDef } from '../registry.js';
import { TensorType, numElements } from '../shape.js';
import { Tensor } from '../tensor.js';
import { f32 as floats, i32 as ints, buildError, runOp1 } from '../testing/kernels.js';

/** The ops that gradient rules of the movement family need: slice_grad, scatter_add, dynamic_update_slice. */

const f32 = (...shape: number[]): TensorType => ({ dtype: 'float32', shape });
const i32 = (...shape: number[]): TensorType => ({ dtype: 'int32', shape });

/** Σ a·b over all elements. */
function dot(a: Tensor, b: Tensor): number {
  let s = 0;
  for (let i = 0; i < a.size; i++) s += a.data[i]! * b.data[i]!;
  return s;
}

describe('slice_grad', () => {
  it('puts dy where slice reads and zeros elsewhere', () => {
    // x[::-2] of 5 reads 4, 2, 0
    expect(runOp1('slice_grad', [floats([3], [1, 2, 3])], { shape: [5], starts: [-1], ends: [-6], steps: [-2] }).toArray()).toEqual([3, 0, 2, 0, 1]);
    // x[:, 1::2] of [2,4] reads columns 1 and 3
    const r = runOp1('slice_grad', [floats([2, 2], [1, 2, 3, 4])], { shape: [2, 4], starts: [1], ends: [9], axes: [-1], steps: [2] });
    expect(r.shape).toEqual([2, 4]);
    expect(r.toArray()).toEqual([0, 1, 0, 2, 0, 3, 0, 4]);
    // empty slice: all zeros
    expect(runOp1('slice_grad', [floats([0], [])], { shape: [3], starts: [2], ends: [1] }).toArray()).toEqual([0, 0, 0]);
  });

  it('keeps the dtype', () => {
    const r = runOp1('slice_grad', [Tensor.from('int32', [2], [-7, 9])], { shape: [4], starts: [0], ends: [4], steps: [3] });
    expect(r.dtype).toBe('int32');
    expect(r.toArray()).toEqual([-7, 0, 0, 9]);
  });

  it('is the adjoint of slice: <slice(x), v> = <x, slice_grad(v)>', () => {
    const arb = fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 1, maxLength: 3 }).chain((shape) =>
      fc.record({
        shape: fc.constant(shape),
        starts: fc.array(fc.integer({ min: -6, max: 6 }), { minLength: shape.length, maxLength: shape.length }),
        ends: fc.array(fc.integer({ min: -6, max: 6 }), { minLength: shape.length, maxLength: shape.length }),
        steps: fc.array(fc.integer({ min: -3, max: 3 }).filter((s) => s !== 0), { minLength: shape.length, maxLength: shape.length }),
      }),
    );
    fc.assert(
      fc.property(arb, ({ shape, starts, ends, steps }) => {
        const x = floats(shape, Array.from({ length: numElements(shape) }, (_, i) => (i % 5) - 2));
        const y = runOp1('slice', [x], { starts, ends, steps });
        const v = floats(y.shape, Array.from({ length: y.size }, (_, i) => (i % 3) + 1));
        const back = runOp1('slice_grad', [v], { shape, starts, ends, steps });
        expect(dot(x, back)).toBe(dot(y, v));
      }),
      { numRuns: 100 },
    );
  });

  it('rejects a dy that is not the slice of shape', () => {
    expect(buildError('slice_grad', [f32(2)], { shape: [5], starts: [0], ends: [5] })).toBe('slice_grad: slicing [5] gives [5] but the operand is [2]');
    expect(buildError('slice_grad', [f32(2)], { shape: [-1], starts: [0], ends: [5] })).toBe('slice_grad: shape [-1] has a negative dimension -1');
    expect(buildError('slice_grad', [f32(2)], { shape: [5], starts: [0], ends: [5], steps: [0] })).toMatch(/^slice_grad: steps \[0\] contain 0/);
  });
});

describe('scatter_add', () => {
  it('adds rows of updates at the indices, repeated indices adding up', () => {
    // data [3] = [10, 20, 30]; indices [0, 0, 2, -1]: row 0 += 1 + 2, row 2 += 3 + 4
    const r = runOp1('scatter_add', [floats([3], [10, 20, 30]), ints([4], [0, 0, 2, -1]), floats([4], [1, 2, 3, 4])]);
    expect(r.toArray()).toEqual([13, 20, 37]);
  });

  it('scatters along any axis with indices of any shape', () => {
    // data [2,3] zeros, axis -1, indices [[2],[0]] (shape [2,1]) → updates [2,2,1]
    // row 0: col 2 += 1, col 0 += 2; row 1: col 2 += 3, col 0 += 4
    const r = runOp1('scatter_add', [Tensor.zeros('float32', [2, 3]), ints([2, 1], [2, 0]), floats([2, 2, 1], [1, 2, 3, 4])], { axis: -1 });
    expect(r.toArray()).toEqual([2, 0, 1, 4, 0, 3]);
    // a scalar index drops the axis from updates: data [2,2], index 1 on axis 0 → updates [2]
    expect(runOp1('scatter_add', [Tensor.zeros('int32', [2, 2]), ints([], [1]), ints([2], [5, 6])]).toArray()).toEqual([0, 0, 5, 6]);
  });

  it('rounds each float16 addition and wraps integers', () => {
    // 1 + 2^-11 is a tie in float16 and rounds to 1 each time, so two such additions leave 1
    const h = runOp1('scatter_add', [Tensor.from('float16', [1], [1]), ints([2], [0, 0]), Tensor.from('float16', [2], [2 ** -11, 2 ** -11])]);
    expect(h.toArray()).toEqual([1]);
    expect(runOp1('scatter_add', [ints([1], [2 ** 31 - 1]), ints([1], [0]), ints([1], [1])]).toArray()).toEqual([-(2 ** 31)]);
  });

  it('is the adjoint of gather: <gather(x), v> = <x, scatter_add(0, v)>', () => {
    const arb = fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 1, maxLength: 3 }).chain((shape) =>
      fc.record({
        shape: fc.constant(shape),
        axis: fc.integer({ min: -shape.length, max: shape.length - 1 }),
        indexShape: fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 2 }),
        salt: fc.nat(100),
      }),
    );
    fc.assert(
      fc.property(arb, ({ shape, axis, indexShape, salt }) => {
        const dim = shape[axis < 0 ? axis + shape.length : axis]!;
        const ind = ints(indexShape, Array.from({ length: numElements(indexShape) }, (_, i) => ((i * 7 + salt) % (2 * dim)) - dim));
        const x = floats(shape, Array.from({ length: numElements(shape) }, (_, i) => (i % 5) - 2));
        const y = runOp1('gather', [x, ind], { axis });
        const v = floats(y.shape, Array.from({ length: y.size }, (_, i) => ((i + salt) % 3) + 1));
        const back = runOp1('scatter_add', [Tensor.zeros('float32', shape), ind, v], { axis });
        expect(dot(x, back)).toBe(dot(y, v));
      }),
      { numRuns: 100 },
    );
  });

  it('rejects bad operands and out-of-range indices', () => {
    expect(buildError('scatter_add', [f32(3), f32(2), f32(2)])).toBe('scatter_add: indices must be int32, got f32[2]');
    expect(buildError('scatter_add', [f32(3, 2), i32(2), f32(2, 3)])).toBe(
      'scatter_add: updates have shape [2,3] but data [3,2] with indices [2] on axis 0 needs [2,2]',
    );
    expect(buildError('scatter_add', [f32(3), i32(2), { dtype: 'float16', shape: [2] }])).toMatch(/^scatter_add: updates are f16\[2\] but data is f32\[3\]: dtypes differ/);
    expect(buildError('scatter_add', [{ dtype: 'bool', shape: [2] }, i32(1), { dtype: 'bool', shape: [1] }])).toMatch(/^scatter_add: operand type bool is not a numeric type/);
    expect(buildError('scatter_add', [f32(), i32(1), f32(1)])).toBe('scatter_add: cannot scatter into a scalar');
    expect(buildError('scatter_add', [f32(3), i32(1), f32(1)], { axis: 1 })).toBe('scatter_add: axis 1 is out of range for [3] (rank 1)');
    expect(() => runOp1('scatter_add', [floats([3], [0, 0, 0]), ints([1], [3]), floats([1], [1])])).toThrow('scatter_add: index 3 is out of range for axis 0 of size 3 in [3]');
    expect(getOpDef('scatter_add')!.operands.map((o) => o.differentiable ?? true)).toEqual([true, false, true]);
  });
});

describe('dynamic_update_slice', () => {
  it('writes the update at the clamped start', () => {
    const x = floats([5], [0, 1, 2, 3, 4]);
    const u = floats([2], [8, 9]);
    expect(runOp1('dynamic_update_slice', [x, u, ints([], [1])], { axis: 0 }).toArray()).toEqual([0, 8, 9, 3, 4]);
    // start 7 clamps to 5 - 2 = 3, -4 to 0
    expect(runOp1('dynamic_update_slice', [x, u, ints([], [7])], { axis: 0 }).toArray()).toEqual([0, 1, 2, 8, 9]);
    expect(runOp1('dynamic_update_slice', [x, u, ints([], [-4])], { axis: 0 }).toArray()).toEqual([8, 9, 2, 3, 4]);
    // along the last axis of [2,3]: columns 1..2 of each row
    const m = runOp1('dynamic_update_slice', [Tensor.zeros('int32', [2, 3]), ints([2, 2], [1, 2, 3, 4]), ints([], [1])], { axis: -1 });
    expect(m.toArray()).toEqual([0, 1, 2, 0, 3, 4]);
  });

  it('is undone by dynamic_slice at the same start', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 5 }), fc.integer({ min: 0, max: 5 }), fc.integer({ min: -3, max: 8 }), (dim, size0, start) => {
        const size = Math.min(size0, dim);
        const x = floats([2, dim], Array.from({ length: 2 * dim }, (_, i) => i));
        const u = floats([2, size], Array.from({ length: 2 * size }, (_, i) => 100 + i));
        const s = ints([], [start]);
        const y = runOp1('dynamic_update_slice', [x, u, s], { axis: 1 });
        expect(runOp1('dynamic_slice', [y, s], { axis: 1, size }).toArray()).toEqual(u.toArray());
      }),
      { numRuns: 50 },
    );
  });

  it('rejects updates that do not fit', () => {
    expect(buildError('dynamic_update_slice', [f32(4, 3), f32(5, 3), i32()], { axis: 0 })).toBe(
      'dynamic_update_slice: update [5,3] does not fit x [4,3]: it needs the same dims except axis 0, where it may be at most 4',
    );
    expect(buildError('dynamic_update_slice', [f32(4, 3), f32(2, 2), i32()], { axis: 0 })).toMatch(/^dynamic_update_slice: update \[2,2\] does not fit x \[4,3\]/);
    expect(buildError('dynamic_update_slice', [f32(4), f32(2), i32(1)], { axis: 0 })).toBe('dynamic_update_slice: start must be an int32 scalar, got i32[1]');
    expect(buildError('dynamic_update_slice', [f32(4), { dtype: 'int32', shape: [2] }, i32()], { axis: 0 })).toMatch(/^dynamic_update_slice: update is i32\[2\] but x is f32\[4\]/);
    expect(getOpDef('dynamic_update_slice')!.saves).toEqual({ operands: [2] });
  });
});
