import fc from 'fast-check';
import { DType, roundToHalf } from '../dtype.js';
import { AttrInput } from '../builder.js';
import { KernelContext } from '../opdef.js';
import { getOpDef } from '../registry.js';
import { numElements } from '../shape.js';
import { Tensor, tensorsIdentical } from '../tensor.js';
import { KERNEL_CTX, buildError, runOp } from '../testing/kernels.js';

const ctx = (seed = 0, step = 0): KernelContext => ({ ...KERNEL_CTX, seed, step });

function moments(t: Tensor): { mean: number; std: number } {
  let s = 0;
  for (const v of t.data) s += v;
  const mean = s / t.size;
  let q = 0;
  for (const v of t.data) q += (v - mean) ** 2;
  return { mean, std: Math.sqrt(q / t.size) };
}

const N = 10000;

describe('random_uniform and random_normal', () => {
  it('draw uniform values in [low, high) with the right moments', () => {
    const u = runOp('random_uniform', [], { dtype: 'float32', shape: [100, 100], seed: 3 })[0]!;
    expect(u.shape).toEqual([100, 100]);
    expect(u.data.every((v) => v >= 0 && v < 1)).toBe(true);
    // uniform on [0,1): mean 1/2, std 1/√12 ≈ 0.2887; the standard error of the mean is ≈ 0.003
    const m = moments(u);
    expect(Math.abs(m.mean - 0.5)).toBeLessThan(0.02);
    expect(Math.abs(m.std - 1 / Math.sqrt(12))).toBeLessThan(0.02);
    const w = runOp('random_uniform', [], { dtype: 'float32', shape: [N], low: 2, high: 5, seed: 3 })[0]!;
    expect(w.data.every((v) => v >= 2 && v < 5)).toBe(true);
    expect(Math.abs(moments(w).mean - 3.5)).toBeLessThan(0.05); // (2+5)/2
  });

  it('draw normal values with the requested mean and std', () => {
    const n = runOp('random_normal', [], { dtype: 'float32', shape: [N], mean: 2, std: 3, seed: 11 })[0]!;
    // standard error of the mean: 3/√10000 = 0.03; a bound of 0.15 is five of them
    const m = moments(n);
    expect(Math.abs(m.mean - 2)).toBeLessThan(0.15);
    expect(Math.abs(m.std - 3)).toBeLessThan(0.15);
    const z = runOp('random_normal', [], { dtype: 'float32', shape: [3], std: 0 })[0]!;
    expect(z.toArray()).toEqual([0, 0, 0]);
  });

  it('depend only on the seed attribute, the run seed and the step', () => {
    const draw = (attrs: AttrInput, c: KernelContext) => runOp('random_normal', [], { dtype: 'float32', shape: [64], ...attrs }, c)[0]!;
    const a = draw({ seed: 5 }, ctx(1, 2));
    expect(tensorsIdentical(a, draw({ seed: 5 }, ctx(1, 2)))).toBe(true);
    expect(tensorsIdentical(a, draw({ seed: 5 }, ctx(1, 3)))).toBe(false);
    expect(tensorsIdentical(a, draw({ seed: 6 }, ctx(1, 2)))).toBe(false);
    expect(tensorsIdentical(a, draw({ seed: 5 }, ctx(2, 2)))).toBe(false);
    const u = (c: KernelContext) => runOp('random_uniform', [], { dtype: 'float32', shape: [64], seed: 5 }, c)[0]!;
    expect(tensorsIdentical(u(ctx(0, 0)), u(ctx(0, 0)))).toBe(true);
    expect(tensorsIdentical(u(ctx(0, 0)), u(ctx(0, 1)))).toBe(false);
  });

  it('rounds float16 results to half values', () => {
    const h = runOp('random_normal', [], { dtype: 'float16', shape: [1000], seed: 1 })[0]!;
    expect(h.dtype).toBe('float16');
    expect(h.data.every((v) => roundToHalf(v) === v)).toBe(true);
    expect(h.data.some((v) => v !== Math.fround(v) || v % 1 !== 0)).toBe(true);
  });

  it('validate their attributes', () => {
    expect(buildError('random_normal', [], { dtype: 'int32', shape: [2] })).toBe('random_normal: dtype i32 is not a float type');
    expect(buildError('random_normal', [], { dtype: 'float32', shape: [2], std: -1 })).toBe('random_normal: std -1 is negative');
    expect(buildError('random_uniform', [], { dtype: 'float32', shape: [2], low: 1, high: 0 })).toBe('random_uniform: low 1 is greater than high 0');
    expect(buildError('random_uniform', [], { dtype: 'float32', shape: [2, -1] })).toBe('random_uniform: shape [2,-1] has a negative dimension');
    expect(buildError('random_uniform', [], { shape: [2] })).toBe("random_uniform: missing required attribute 'dtype'");
  });

  it('are sources with no gradient', () => {
    for (const name of ['random_normal', 'random_uniform']) {
      const def = getOpDef(name)!;
      expect(def.grad).toBe('none');
      expect(def.typeFromAttrs).toBe(true);
      expect(def.operands).toEqual([]);
    }
  });
});

describe('dropout', () => {
  const ones = Tensor.full('float32', [N], 1);

  it('is the identity with an all-true mask when not training or when ratio is 0', () => {
    const x = Tensor.from('float32', [2, 2], [1, -2, NaN, 4]);
    for (const attrs of [{ training: false }, { ratio: 0 }, { ratio: 0.9, training: false }]) {
      const [y, mask] = runOp('dropout', [x], attrs);
      expect(tensorsIdentical(y!, x)).toBe(true);
      expect(mask!.dtype).toBe('bool');
      expect(mask!.toArray()).toEqual([1, 1, 1, 1]);
    }
  });

  it('drops about ratio of the elements and scales the rest by 1/(1-ratio)', () => {
    const [y, mask] = runOp('dropout', [ones], { ratio: 0.25, seed: 9 });
    const kept = Array.from(mask!.data).reduce((a, m) => a + m, 0);
    // keep probability 0.75; standard error √(0.75·0.25/10000) ≈ 0.0043
    expect(Math.abs(kept / N - 0.75)).toBeLessThan(0.02);
    // 1 / (1 - 0.25) = 4/3, stored as float32
    const scaled = Math.fround(4 / 3);
    for (let i = 0; i < N; i++) expect(y!.data[i]).toBe(mask!.data[i] ? scaled : 0);
  });

  it('rounds float16 scaling and keeps values exact where the scale is exact', () => {
    const h = Tensor.full('float16', [100], 1);
    const [y, mask] = runOp('dropout', [h], { ratio: 0.25 });
    // 4/3 in half: 1 + 341/1024 = 1.3330078125 (the nearest binary16 value)
    for (let i = 0; i < 100; i++) expect(y!.data[i]).toBe(mask!.data[i] ? 1.3330078125 : 0);
    const x = Tensor.from('float32', [4], [1, 2, 3, 4]);
    const [y2, m2] = runOp('dropout', [x], { ratio: 0.5, seed: 4 });
    for (let i = 0; i < 4; i++) expect(y2!.data[i]).toBe(m2!.data[i] ? 2 * (i + 1) : 0); // scale 1/(1-0.5) = 2
  });

  it('draws a new mask each step, the same one for the same step', () => {
    const mask = (step: number, seed = 0) => runOp('dropout', [ones], { seed }, ctx(7, step))[1]!;
    expect(tensorsIdentical(mask(0), mask(0))).toBe(true);
    expect(tensorsIdentical(mask(0), mask(1))).toBe(false);
    expect(tensorsIdentical(mask(0), mask(0, 1))).toBe(false);
  });

  it('drops everything with ratio 1', () => {
    const [y, mask] = runOp('dropout', [Tensor.full('float32', [8], 3)], { ratio: 1 });
    expect(y!.toArray()).toEqual(new Array(8).fill(0));
    expect(mask!.toArray()).toEqual(new Array(8).fill(0));
  });

  it('validates its operand and ratio', () => {
    expect(buildError('dropout', [{ dtype: 'float32', shape: [2] }], { ratio: 1.5 })).toBe('dropout: ratio 1.5 is not in [0, 1]');
    expect(buildError('dropout', [{ dtype: 'int32', shape: [2] }], {})).toBe('dropout: operand type i32 is not a float type');
    expect(typeof getOpDef('dropout')!.grad).toBe('function'); // differentiable in x: the gradient reuses the mask
    expect(getOpDef('dropout')!.saves).toEqual({ results: [1] });
  });
});

describe('random properties', () => {
  it('infer the shapes the kernels produce', () => {
    const shapeArb = fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 0, maxLength: 4 });
    fc.assert(
      fc.property(
        shapeArb,
        fc.constantFrom<DType>('float32', 'float16'),
        fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.boolean(),
        fc.nat(1000),
        (shape, dtype, seed, ratio, training, step) => {
          const c = ctx(seed, step);
          runOp('random_normal', [], { dtype, shape, seed }, c);
          runOp('random_uniform', [], { dtype, shape, seed, low: -1, high: 1 }, c);
          const x = Tensor.from(dtype, shape, Array.from({ length: numElements(shape) }, (_, i) => i - 3));
          const [y, mask] = runOp('dropout', [x], { ratio, seed, training }, c);
          // every element is either dropped (0) or kept and scaled
          for (let i = 0; i < x.size; i++) if (!mask!.data[i]) expect(y!.data[i]).toBe(0 * x.data[i]!);
        },
      ),
      { numRuns: 100 },
    );
  });
});
