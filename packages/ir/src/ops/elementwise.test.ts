import fc from 'fast-check';
import { GraphBuilder } from '../builder.js';
import { DiagnosticError } from '../diagnostics.js';
import { getOpDef } from '../registry.js';
import { Tensor } from '../tensor.js';
import { roundToHalf } from '../dtype.js';
import { KERNEL_CTX, f32, runOp1 } from '../testing/kernels.js';
import { erf } from './math.js';

describe('element-wise kernels', () => {
  it('broadcasts [2,3] with [3] and [2,1] like NumPy', () => {
    const a = f32([2, 3], [1, 2, 3, 4, 5, 6]);
    expect(runOp1('add', [a, f32([3], [10, 20, 30])]).toArray()).toEqual([11, 22, 33, 14, 25, 36]);
    expect(runOp1('sub', [a, f32([2, 1], [1, 2])]).toArray()).toEqual([0, 1, 2, 2, 3, 4]);
    // [2,1,2] * [3,1] -> [2,3,2]
    const c = runOp1('mul', [f32([2, 1, 2], [1, 2, 3, 4]), f32([3, 1], [1, 10, 100])]);
    expect(c.shape).toEqual([2, 3, 2]);
    expect(c.toArray()).toEqual([1, 2, 10, 20, 100, 200, 3, 4, 30, 40, 300, 400]);
    // scalar with tensor
    expect(runOp1('div', [f32([], [1]), f32([2], [2, 4])]).toArray()).toEqual([0.5, 0.25]);
  });

  it('computes unary functions', () => {
    const x = f32([4], [-2, -0.5, 0, 3]);
    expect(runOp1('relu', [x]).toArray()).toEqual([0, 0, 0, 3]);
    expect(runOp1('abs', [x]).toArray()).toEqual([2, 0.5, 0, 3]);
    expect(runOp1('neg', [x]).toArray()).toEqual([2, 0.5, -0, -3]);
    expect(runOp1('sign', [x]).toArray()).toEqual([-1, -1, 0, 1]);
    expect(runOp1('floor', [f32([2], [-1.5, 1.5])]).toArray()).toEqual([-2, 1]);
    expect(runOp1('ceil', [f32([2], [-1.5, 1.5])]).toArray()).toEqual([-1, 2]);
    expect(runOp1('round', [f32([4], [0.5, 1.5, 2.5, -0.5])]).toArray()).toEqual([0, 2, 2, -0]);
    expect(runOp1('reciprocal', [f32([2], [4, -0.5])]).toArray()).toEqual([0.25, -2]);
    expect(runOp1('sqrt', [f32([2], [9, 2])]).toArray()).toEqual([3, Math.fround(Math.SQRT2)]);
    // sigmoid(0) = 1/2; sigmoid(-1000) underflows to 0 without NaN
    expect(runOp1('sigmoid', [f32([2], [0, -1000])]).toArray()).toEqual([0.5, 0]);
  });

  it('bitwise ops act on two\'s-complement bits and refuse floats', () => {
    const i = Tensor.from('int32', [3], [12, -1, 5]);
    const j = Tensor.from('int32', [3], [10, 6, -8]);
    // 12 = 0b1100, 10 = 0b1010; -1 is all ones; 5 & -8 = 0b0101 & ...11000 = 0
    expect(runOp1('bitwise_and', [i, j]).toArray()).toEqual([8, 6, 0]);
    expect(runOp1('bitwise_or', [i, j]).toArray()).toEqual([14, -1, -3]);
    expect(runOp1('bitwise_xor', [i, j]).toArray()).toEqual([6, -7, -3]);
    expect(runOp1('bitwise_not', [i]).toArray()).toEqual([-13, 0, -6]);
    const u = Tensor.from('uint32', [2], [0, 0xf0f0f0f0]);
    expect(runOp1('bitwise_not', [u]).toArray()).toEqual([0xffffffff, 0x0f0f0f0f]);
    expect(runOp1('bitwise_xor', [u, Tensor.from('uint32', [2], [0xffffffff, 0xff])]).toArray()).toEqual([0xffffffff, 0xf0f0f00f]);
    const b = new GraphBuilder('g');
    const x = b.input('x', 'float32', [2]);
    expect(() => b.op('bitwise_and', [x, x])).toThrow(/not an integer type/);
  });

  it('bitcast reads the bits of 32-bit values as another 32-bit dtype', () => {
    // 1.0f = 0x3f800000; -2.0f = 0xc0000000
    expect(runOp1('bitcast', [f32([2], [1, -2])], { to: 'int32' }).toArray()).toEqual([0x3f800000, -0x40000000]);
    expect(runOp1('bitcast', [f32([1], [-2])], { to: 'uint32' }).toArray()).toEqual([0xc0000000]);
    expect(runOp1('bitcast', [Tensor.from('int32', [2], [-1, 0x40490fdb])], { to: 'uint32' }).toArray()).toEqual([0xffffffff, 0x40490fdb]);
    expect(runOp1('bitcast', [Tensor.from('int32', [1], [0x40490fdb])], { to: 'float32' }).toArray()).toEqual([Math.fround(Math.PI)]);
    const b = new GraphBuilder('g');
    expect(() => b.op('bitcast', [b.input('h', 'float16', [2])], { to: 'int32' })).toThrow(/reinterprets 32-bit dtypes/);
  });

  it('gelu matches x·Φ(x) and the tanh approximation', () => {
    // Φ(1) = 0.8413447460685429
    expect(runOp1('gelu', [f32([1], [1])]).data[0]).toBeCloseTo(0.8413447, 6);
    // 0.5·(1 + tanh(√(2/π)·(1 + 0.044715))) = 0.8411919906082768
    expect(runOp1('gelu', [f32([1], [1])], { approximate: 'tanh' }).data[0]).toBeCloseTo(0.841192, 6);
  });

  it('erf is accurate', () => {
    // reference values of erf
    const cases: [number, number][] = [[0, 0], [0.1, 0.1124629160182849], [0.5, 0.5204998778130465], [1, 0.8427007929497149], [2, 0.9953222650189527], [-1.5, -0.9661051464753108], [4, 0.9999999845827421]];
    for (const [x, y] of cases) expect(Math.abs(erf(x) - y)).toBeLessThan(2e-7);
  });

  it('integer arithmetic wraps and truncates like the device', () => {
    const i = (v: number[]) => Tensor.from('int32', [v.length], v);
    expect(runOp1('div', [i([7, -7, 7]), i([2, 2, 0])]).toArray()).toEqual([3, -3, 0]);
    expect(runOp1('mul', [i([65536]), i([65536])]).toArray()).toEqual([0]);
    expect(runOp1('add', [i([2147483647]), i([1])]).toArray()).toEqual([-2147483648]);
    expect(runOp1('pow', [i([3, 2]), i([3, 10])]).toArray()).toEqual([27, 1024]);
  });

  it('compares and combines booleans', () => {
    const a = f32([3], [1, 2, 3]);
    const b = f32([1], [2]);
    expect(runOp1('less', [a, b]).toArray()).toEqual([1, 0, 0]);
    expect(runOp1('greater', [a, b]).toArray()).toEqual([0, 0, 1]);
    expect(runOp1('equal', [a, b]).dtype).toBe('bool');
    const t = Tensor.from('bool', [4], [1, 1, 0, 0]);
    const u = Tensor.from('bool', [4], [1, 0, 1, 0]);
    expect(runOp1('and', [t, u]).toArray()).toEqual([1, 0, 0, 0]);
    expect(runOp1('or', [t, u]).toArray()).toEqual([1, 1, 1, 0]);
    expect(runOp1('not', [t]).toArray()).toEqual([0, 0, 1, 1]);
  });

  it('where, clip, max/min with NaN', () => {
    const c = Tensor.from('bool', [2, 1], [1, 0]);
    expect(runOp1('where', [c, f32([2], [1, 2]), f32([], [9])]).toArray()).toEqual([1, 2, 9, 9]);
    expect(runOp1('clip', [f32([3], [-5, 0.5, 5])], { min: -1, max: 1 }).toArray()).toEqual([-1, 0.5, 1]);
    expect(runOp1('clip', [f32([2], [-5, 5])], { max: 0 }).toArray()).toEqual([-5, 0]);
    expect(runOp1('max', [f32([2], [1, NaN]), f32([2], [2, 0])]).toArray()).toEqual([2, NaN]);
  });

  it('casts', () => {
    expect(runOp1('cast', [f32([3], [1.7, -1.7, 0])], { to: 'int32' }).toArray()).toEqual([1, -1, 0]);
    expect(runOp1('cast', [f32([3], [1.7, -1.7, 0])], { to: 'bool' }).toArray()).toEqual([1, 1, 0]);
    expect(runOp1('cast', [f32([1], [0.1])], { to: 'float16' }).toArray()).toEqual([roundToHalf(0.1)]);
    expect(runOp1('cast', [Tensor.from('int32', [1], [-1])], { to: 'uint32' }).toArray()).toEqual([4294967295]);
  });

  it('rounds float16 results to nearest even', () => {
    const h = (v: number[]) => Tensor.from('float16', [v.length], v);
    // 2048 + 1 is not representable in half (spacing 2 above 2048): ties to even gives 2048
    expect(runOp1('add', [h([2048]), h([1])]).toArray()).toEqual([2048]);
    expect(runOp1('add', [h([2048]), h([3])]).toArray()).toEqual([2052]);
    // 60000 + 10000 overflows half to +inf
    expect(runOp1('add', [h([60000]), h([10000])]).toArray()).toEqual([Infinity]);
  });

  it('shape inference agrees with kernels on broadcast shapes', () => {
    const dim = fc.integer({ min: 1, max: 3 });
    const shape = fc.array(dim, { maxLength: 3 });
    fc.assert(
      fc.property(shape, fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }), fc.constantFrom('add', 'mul', 'max', 'pow'), (s, ones, op) => {
        const t = s.map((d, i) => (ones[i] ? 1 : d));
        const a = Tensor.full('float32', s, 2);
        const b = Tensor.full('float32', t, 3);
        const def = getOpDef(op)!;
        const [inferred] = def.infer([a, b], {});
        const out = def.kernel([a, b], {}, KERNEL_CTX)[0]!;
        expect(out.shape).toEqual(inferred!.shape);
        expect(out.dtype).toBe(inferred!.dtype);
      }),
    );
  });

  it('reports shape and type errors at the op', () => {
    const b = new GraphBuilder('g');
    const x = b.input('x', 'float32', [2, 3]);
    const y = b.input('y', 'float32', [4]);
    expect(() => b.op('add', [x, y])).toThrow('add: shapes [2,3] and [4] are not broadcastable');
    const m = b.input('m', 'bool', [2]);
    expect(() => b.op('exp', [m])).toThrow(DiagnosticError);
    expect(() => b.op('and', [x, x])).toThrow('and: operand type f32 is not a bool type');
    expect(() => b.op('clip', [x], { lo: 1 })).toThrow("clip: unknown attribute 'lo'");
  });
});
