import fc from 'fast-check';
import { DType } from '../dtype.js';
import { AttrInput } from '../builder.js';
import { getOpDef } from '../registry.js';
import { Shape, numElements } from '../shape.js';
import { Tensor } from '../tensor.js';
import { buildError as buildErrorOn, runOp, runOp1 } from '../testing/kernels.js';

/** The diagnostic message of building `kind` on an input of this type. */
const buildError = (kind: string, dtype: DType, shape: Shape, attrs: AttrInput = {}) => buildErrorOn(kind, [{ dtype, shape }], attrs);

const m23 = Tensor.from('float32', [2, 3], [1, 2, 3, 4, 5, 6]);

describe('reduce_* values', () => {
  it('reduces all axes by default, with and without keepdims', () => {
    const s = runOp1('reduce_sum', m23); // 1+2+3+4+5+6 = 21
    expect(s.shape).toEqual([]);
    expect(s.toArray()).toEqual([21]);
    const k = runOp1('reduce_sum', m23, { keepdims: true });
    expect(k.shape).toEqual([1, 1]);
    expect(k.toArray()).toEqual([21]);
    expect(runOp1('reduce_mean', m23).toArray()).toEqual([3.5]); // 21 / 6
  });

  it('reduces rows and columns, with negative axes', () => {
    expect(runOp1('reduce_sum', m23, { axes: [1] }).toArray()).toEqual([6, 15]); // 1+2+3, 4+5+6
    const neg = runOp1('reduce_sum', m23, { axes: [-1], keepdims: true });
    expect(neg.shape).toEqual([2, 1]);
    expect(neg.toArray()).toEqual([6, 15]);
    expect(runOp1('reduce_sum', m23, { axes: [0] }).toArray()).toEqual([5, 7, 9]); // 1+4, 2+5, 3+6
    expect(runOp1('reduce_mean', m23, { axes: [1] }).toArray()).toEqual([2, 5]); // 6/3, 15/3
    expect(runOp1('reduce_max', m23, { axes: [0] }).toArray()).toEqual([4, 5, 6]);
    expect(runOp1('reduce_min', m23, { axes: [-1] }).toArray()).toEqual([1, 4]);
    expect(runOp1('reduce_prod', m23, { axes: [1] }).toArray()).toEqual([6, 120]); // 1·2·3, 4·5·6
  });

  it('reduces several non-adjacent axes in any order', () => {
    // x[i,j,k] = 4i + 2j + k; summing i and k: j=0 → 0+1+4+5 = 10, j=1 → 2+3+6+7 = 18
    const x = Tensor.from('int32', [2, 2, 2], [0, 1, 2, 3, 4, 5, 6, 7]);
    for (const axes of [[0, 2], [2, 0], [-3, -1]]) {
      expect(runOp1('reduce_sum', x, { axes }).toArray()).toEqual([10, 18]);
    }
    const kept = runOp1('reduce_max', x, { axes: [0, 2], keepdims: true });
    expect(kept.shape).toEqual([1, 2, 1]);
    expect(kept.toArray()).toEqual([5, 7]); // max of {0,1,4,5}, {2,3,6,7}
  });

  it('gives the identity of each operation over no elements', () => {
    const e = Tensor.zeros('float32', [2, 0]);
    expect(runOp1('reduce_sum', e, { axes: [1] }).toArray()).toEqual([0, 0]);
    expect(runOp1('reduce_prod', e, { axes: [1] }).toArray()).toEqual([1, 1]);
    expect(runOp1('reduce_max', e, { axes: [1] }).toArray()).toEqual([-Infinity, -Infinity]);
    expect(runOp1('reduce_min', e, { axes: [1] }).toArray()).toEqual([Infinity, Infinity]);
    expect(runOp1('reduce_mean', e, { axes: [1] }).toArray()).toEqual([NaN, NaN]);
    // reducing the other axis leaves zero outputs
    expect(runOp1('reduce_sum', e, { axes: [0] }).shape).toEqual([0]);
    const ei = Tensor.zeros('int32', [0]);
    expect(runOp1('reduce_max', ei).toArray()).toEqual([-(2 ** 31)]);
    expect(runOp1('reduce_min', ei).toArray()).toEqual([2 ** 31 - 1]);
    expect(runOp1('reduce_min', Tensor.zeros('uint32', [0])).toArray()).toEqual([2 ** 32 - 1]);
  });

  it('propagates NaN through max and min', () => {
    const x = Tensor.from('float32', [3], [1, NaN, 3]);
    expect(runOp1('reduce_max', x).toArray()).toEqual([NaN]);
    expect(runOp1('reduce_min', x).toArray()).toEqual([NaN]);
  });

  it('accumulates floats in float64 and rounds once to the dtype', () => {
    // 1 + 2^-24 + 2^-24 = 1 + 2^-23, a float32 value; summing in float32 would lose both halves
    const f = Tensor.from('float32', [3], [1, 2 ** -24, 2 ** -24]);
    expect(runOp1('reduce_sum', f).toArray()).toEqual([1 + 2 ** -23]);
    // in float16, 1 + 2^-11 is a tie between 1 and 1 + 2^-10 and rounds to even (1)
    const h = Tensor.from('float16', [2], [1, 2 ** -11]);
    expect(runOp1('reduce_sum', h).toArray()).toEqual([1]);
    // 1 + 3·2^-11 rounds up to 1 + 2^-9
    const h3 = Tensor.from('float16', [4], [1, 2 ** -11, 2 ** -11, 2 ** -11]);
    expect(runOp1('reduce_sum', h3).toArray()).toEqual([1 + 2 ** -9]);
  });

  it('wraps integer sums and products modulo 2^32', () => {
    expect(runOp1('reduce_sum', Tensor.from('int32', [2], [2 ** 31 - 1, 1])).toArray()).toEqual([-(2 ** 31)]);
    expect(runOp1('reduce_sum', Tensor.from('uint32', [2], [2 ** 32 - 1, 2])).toArray()).toEqual([1]);
    // 65537² = 2^32 + 2·65536 + 1 → 131073 after wrapping
    expect(runOp1('reduce_prod', Tensor.from('int32', [2], [65537, 65537])).toArray()).toEqual([131073]);
    expect(runOp1('reduce_prod', Tensor.from('uint32', [2], [65536, 65536])).toArray()).toEqual([0]);
    expect(runOp1('reduce_max', Tensor.from('uint32', [3], [7, 2 ** 32 - 1, 0])).toArray()).toEqual([2 ** 32 - 1]);
  });

  it('treats bool max as any and min as all', () => {
    const b = Tensor.from('bool', [2, 2], [1, 0, 0, 0]);
    expect(runOp1('reduce_max', b, { axes: [1] }).toArray()).toEqual([1, 0]);
    const c = Tensor.from('bool', [2, 2], [1, 1, 1, 0]);
    expect(runOp1('reduce_min', c, { axes: [1] }).toArray()).toEqual([1, 0]);
  });

  it('reduces a scalar to itself', () => {
    const s = Tensor.scalar('float32', 5);
    expect(runOp1('reduce_sum', s).toArray()).toEqual([5]);
    expect(runOp1('reduce_sum', s, { axes: [0] }).shape).toEqual([]);
    expect(runOp1('reduce_mean', s, { axes: [-1], keepdims: true }).toArray()).toEqual([5]);
  });
});

describe('argmax values', () => {
  const x = Tensor.from('float32', [2, 3], [1, 3, 3, 7, 2, 7]);

  it('picks the first maximum, or the last with select_last_index', () => {
    const r = runOp1('argmax', x, { axis: 1 });
    expect(r.dtype).toBe('int32');
    expect(r.toArray()).toEqual([1, 0]); // rows [1,3,3] and [7,2,7]
    expect(runOp1('argmax', x, { axis: -1, select_last_index: true }).toArray()).toEqual([2, 2]);
    expect(runOp1('argmax', x).toArray()).toEqual([1, 0, 1]); // columns (1,7) (3,2) (3,7)
    const k = runOp1('argmax', x, { axis: 1, keepdims: true });
    expect(k.shape).toEqual([2, 1]);
  });

  it('treats NaN as the maximum, first NaN winning', () => {
    const n = Tensor.from('float32', [4], [1, NaN, 5, NaN]);
    expect(runOp1('argmax', n).toArray()).toEqual([1]);
    expect(runOp1('argmax', n, { select_last_index: true }).toArray()).toEqual([3]);
    expect(runOp1('argmax', Tensor.from('float32', [2], [NaN, 1])).toArray()).toEqual([0]);
    expect(runOp1('argmax', Tensor.from('float32', [2], [-Infinity, -Infinity])).toArray()).toEqual([0]);
  });

  it('works on integers, bools and scalars', () => {
    expect(runOp1('argmax', Tensor.from('int32', [3], [-5, -1, -3])).toArray()).toEqual([1]);
    expect(runOp1('argmax', Tensor.from('uint32', [2], [1, 2 ** 32 - 1])).toArray()).toEqual([1]);
    expect(runOp1('argmax', Tensor.from('bool', [3], [0, 1, 1]), { select_last_index: true }).toArray()).toEqual([2]);
    const s = runOp1('argmax', Tensor.scalar('float32', 4));
    expect(s.shape).toEqual([]);
    expect(s.toArray()).toEqual([0]);
  });
});

describe('reduce errors', () => {
  it('names the op and the problem', () => {
    expect(buildError('reduce_sum', 'float32', [2, 3], { axes: [2] })).toBe('reduce_sum: axis 2 is out of range for input [2,3] (rank 2)');
    expect(buildError('reduce_sum', 'float32', [2, 3], { axes: [1, -1] })).toMatch(/^reduce_sum: axes \[1, -1\] repeat an axis/);
    expect(buildError('reduce_mean', 'int32', [2])).toMatch(/^reduce_mean: operand type i32 is not a float type/);
    expect(buildError('reduce_sum', 'bool', [2])).toMatch(/^reduce_sum: operand type bool is not a numeric type/);
    expect(buildError('reduce_max', 'float32', [2], { axis: 0 })).toMatch(/^reduce_max: unknown attribute 'axis'/);
    expect(buildError('argmax', 'float32', [2, 3], { axis: -3 })).toBe('argmax: axis -3 is out of range for input [2,3] (rank 2)');
    expect(buildError('argmax', 'float32', [2, 0], { axis: 1 })).toBe('argmax: cannot take the argmax over axis 1 of size 0 in [2,0]');
  });

  it('marks argmax as non-differentiable', () => {
    expect(getOpDef('argmax')!.grad).toBe('none');
    expect(typeof getOpDef('reduce_sum')!.grad).toBe('function');
  });
});

describe('reduce properties', () => {
  const shapeArb = fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 0, maxLength: 4 });
  const caseArb = shapeArb.chain((shape) =>
    fc.record({
      shape: fc.constant(shape),
      axes: fc.subarray(shape.map((_, i) => i)).chain((axes) =>
        fc.tuple(...axes.map((a) => fc.constantFrom(a, a - shape.length))).map((xs) => xs as number[]),
      ),
      keepdims: fc.boolean(),
      op: fc.constantFrom('reduce_sum', 'reduce_mean', 'reduce_max', 'reduce_min', 'reduce_prod'),
    }),
  );

  it('infers the shape the kernel produces', () => {
    fc.assert(
      fc.property(caseArb, ({ shape, axes, keepdims, op }) => {
        const n = numElements(shape);
        const x = Tensor.from('float32', shape, Array.from({ length: n }, (_, i) => (i % 7) - 3));
        runOp(op, [x], { axes, keepdims }); // runOp() compares inferred and produced types
      }),
    );
  });

  it('argmax infers the shape the kernel produces', () => {
    const argArb = fc
      .array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 4 })
      .chain((shape) => fc.record({ shape: fc.constant(shape), axis: fc.integer({ min: -shape.length, max: shape.length - 1 }), keepdims: fc.boolean() }));
    fc.assert(
      fc.property(argArb, ({ shape, axis, keepdims }) => {
        const x = Tensor.from('int32', shape, Array.from({ length: numElements(shape) }, (_, i) => (i * 5) % 3));
        const r = runOp1('argmax', x, { axis, keepdims });
        const dim = shape[axis < 0 ? axis + shape.length : axis]!;
        for (const v of r.data) expect(v >= 0 && v < dim).toBe(true);
      }),
    );
  });

  it('sums every element when reducing all axes (int32 is exact)', () => {
    fc.assert(
      fc.property(shapeArb, fc.array(fc.integer({ min: -1000, max: 1000 }), { minLength: 256, maxLength: 256 }), (shape, pool) => {
        const n = numElements(shape);
        const vals = Array.from({ length: n }, (_, i) => pool[i % pool.length]!);
        const x = Tensor.from('int32', shape, vals);
        expect(runOp1('reduce_sum', x).toArray()).toEqual([vals.reduce((a, b) => a + b, 0)]);
      }),
    );
  });
});
