import { counterBits, normalFromBits, threefry2x32, uniformFromBits } from './random.js';
import { KERNEL_CTX, runOp } from './testing/kernels.js';
import { mixSeed } from './ops/random.js';

/** Acklam's inverse normal CDF in float64 (relative error below 1.2e-9), as the yardstick. */
function inverseNormal(p: number): number {
  const a = [-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [-0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const poly = (k: number[], x: number) => k.reduce((acc, v) => acc * x + v, 0);
  if (p < 0.02425 || p > 0.97575) {
    const q = Math.sqrt(-2 * Math.log(Math.min(p, 1 - p)));
    const x = poly(c, q) / (poly(d, q) * q + 1);
    return p < 0.5 ? x : -x;
  }
  const q = p - 0.5;
  const r = q * q;
  return (poly(a, r) * q) / (poly(b, r) * r + 1);
}

describe('the counter-based generator of random ops', () => {
  test('Threefry-2x32-20 gives the Random123 known-answer values', () => {
    expect(threefry2x32(0, 0, 0, 0)).toBe(0x6b200159);
    expect(threefry2x32(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff)).toBe(0x1cb996fc);
    expect(threefry2x32(0x13198a2e, 0x03707344, 0x243f6a88, 0x85a308d3)).toBe(0xc4923a9c);
  });

  test('normalFromBits is the inverse normal CDF at (2k + 1) / 2^24 to float32 accuracy, and odd', () => {
    let worst = 0;
    const odd: number[] = [];
    for (let k = 0; k < 2 ** 23; k += 331) {
      const z = normalFromBits((k << 9) >>> 0);
      const want = inverseNormal((2 * k + 1) / 2 ** 24);
      worst = Math.max(worst, Math.abs(z - want) / Math.max(1, Math.abs(want)));
      if (Math.fround(z) !== z || normalFromBits(((2 ** 23 - 1 - k) << 9) >>> 0) !== -z) odd.push(k);
    }
    expect(odd).toEqual([]);
    expect(worst).toBeLessThan(1e-6);
    // p = 2^-24 is the most extreme value
    expect(normalFromBits(0)).toBeCloseTo(-5.2947, 3);
  });

  test('uniformFromBits has 24 bits in [0, 1)', () => {
    expect(uniformFromBits(0)).toBe(0);
    expect(uniformFromBits(0xffffffff)).toBe(1 - 2 ** -24);
    expect(uniformFromBits(0x800000ff)).toBe(0.5);
  });

  test('element i of a random op depends on its index alone, so any slice can be drawn by itself', () => {
    const ctx = { ...KERNEL_CTX, seed: 9, step: 4 };
    const u = runOp('random_uniform', [], { dtype: 'float32', shape: [1000], seed: 21 }, ctx)[0]!;
    const key = (21 ^ mixSeed(9)) >>> 0;
    for (const i of [0, 1, 517, 999]) expect(u.data[i]).toBe(uniformFromBits(counterBits(key, 4, i)));
  });
});
