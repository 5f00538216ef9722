/**
 * The deterministic random number generator behind initializers, data shuffling and test data:
 * xoshiro128** seeded through splitmix32; the same seed gives the same stream everywhere. Random
 * ops (dropout, random_normal, random_uniform) use the counter-based generator below instead, which
 * the device runs too.
 */
export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;
  private spare: number | undefined;

  constructor(seed: number, stream = 0) {
    let x = (seed >>> 0) ^ Math.imul(stream >>> 0, 0x9e3779b9);
    const next = (): number => {
      x = (x + 0x9e3779b9) | 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next();
    if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
  }

  /** Next 32-bit unsigned integer. */
  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }

  /** Uniform in [0, 1) with 24 bits of precision (exact in float32). */
  uniform(): number {
    return (this.nextU32() >>> 8) / 16777216;
  }

  /** Standard normal (Box-Muller). */
  normal(): number {
    if (this.spare !== undefined) {
      const s = this.spare;
      this.spare = undefined;
      return s;
    }
    let u = this.uniform();
    while (u === 0) u = this.uniform();
    const v = this.uniform();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

/**
 * Counter-based random numbers for random ops: Threefry-2x32 with 20 rounds (Salmon et al.,
 * "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the generator of JAX). Element i of a
 * random op draws the first word of threefry(key, (i, 0)), so any slice of the result can be
 * produced without the draws before it (each IPU tile makes its own elements). Everything after
 * the draw is float32 arithmetic, which the device codelets (packages/codegen-poplar/cpp/
 * tg_random.hpp) repeat operation by operation, so both give the same bits.
 */
export function threefry2x32(k0: number, k1: number, c0: number, c1: number): number {
  const k2 = (k0 ^ k1 ^ 0x1bd11bda) >>> 0;
  const ks = [k0 >>> 0, k1 >>> 0, k2];
  let x0 = (c0 + ks[0]!) >>> 0;
  let x1 = (c1 + ks[1]!) >>> 0;
  const rounds = (r: readonly number[]) => {
    for (const n of r) {
      x0 = (x0 + x1) >>> 0;
      x1 = rotl(x1, n) >>> 0;
      x1 = (x1 ^ x0) >>> 0;
    }
  };
  const R0 = [13, 15, 26, 6];
  const R1 = [17, 29, 16, 24];
  for (let s = 1; s <= 5; s++) {
    rounds(s % 2 ? R0 : R1);
    x0 = (x0 + ks[s % 3]!) >>> 0;
    x1 = (x1 + ks[(s + 1) % 3]! + s) >>> 0;
  }
  return x0;
}

/** The 32 random bits of element `index` of a random op keyed by (key, step). */
export function counterBits(key: number, step: number, index: number): number {
  return threefry2x32(key, step, index, 0);
}

/** Uniform in [0, 1) with 24 bits (exact in float32). */
export function uniformFromBits(bits: number): number {
  return (bits >>> 8) / 16777216;
}

/** The scale of dropout's kept elements, in float32 (ratio 1 keeps nothing and scales by 0). */
export function dropoutScale(ratio: number): number {
  return ratio === 1 ? 0 : Math.fround(1 / (1 - ratio));
}

/** The top-24-bit draw from which dropout keeps an element: uniform ≥ ratio, as an integer. */
export function dropoutThreshold(ratio: number): number {
  return Math.ceil(ratio * 16777216);
}

const f32 = Math.fround;
// Wichura's PPND7 (Applied Statistics algorithm AS 241, the single-precision inverse normal CDF),
// coefficients rounded to float32; every coefficient is positive, so float32 evaluation is stable
const PPND7_A = [59.109375, 159.29114, 50.434273, 3.3871326].map(f32);
const PPND7_B = [67.18756, 78.75776, 17.89517].map(f32);
const PPND7_C = [0.17023821, 1.3067285, 2.7568154, 1.4234372].map(f32);
const PPND7_D = [0.12021133, 0.73700166].map(f32);
const PPND7_SPLIT = f32(0.180625);
const PPND7_TAIL = f32(1.6);
// log's series 2s(1 + z/3 + z^2/5 + ...) and ln 2 split so that small multiples of the high part are exact
const LOG_SERIES = [0.09090909, 0.11111111, 0.14285715, 0.2, 0.33333334].map(f32);
const SQRT2_F = f32(1.4142135);
const LN2_HI = 0.693145751953125;
const LN2_LO = f32(0.0000014286068);
/** |p - 1/2| · 2^24 up to which the central approximation is used (|p - 1/2| <= 0.425). */
const CENTRAL_LIMIT = 7130316;

/** p(x) = ((c0·x + c1)·x + c2)… in float32, one rounding per operation. */
function horner(c: readonly number[], x: number): number {
  let a = c[0]!;
  for (let i = 1; i < c.length; i++) a = f32(f32(a * x) + c[i]!);
  return a;
}

/** ln(n · 2^-24) for an integer 1 ≤ n < 2^24, in float32 arithmetic. */
function logScaled(n: number): number {
  let e = 31 - Math.clz32(n);
  let m = f32(n * 2 ** -e);
  if (m > SQRT2_F) {
    m = f32(m * 0.5);
    e += 1;
  }
  const s = f32(f32(m - 1) / f32(m + 1));
  const z = f32(s * s);
  const w = f32(z * horner(LOG_SERIES, z));
  const s2 = f32(s + s);
  const lm = f32(s2 + f32(s2 * w));
  const k = e - 24;
  return f32(f32(k * LN2_HI) + f32(f32(k * LN2_LO) + lm));
}

/**
 * A standard normal value from 32 random bits, in float32: the inverse normal CDF (PPND7, about
 * 1e-7 relative error) at p = (2k + 1) / 2^24 for the top 23 bits k, which is exact and never 0
 * or 1 (so |value| < 5.3).
 */
export function normalFromBits(bits: number): number {
  const m = 2 * (bits >>> 9) + 1 - 8388608; // 2^24 (p - 1/2), odd, |m| < 2^23
  const q = f32(m * 2 ** -24);
  if (Math.abs(m) <= CENTRAL_LIMIT) {
    const r = f32(PPND7_SPLIT - f32(q * q));
    const num = f32(q * horner(PPND7_A, r));
    const den = f32(f32(horner(PPND7_B, r) * r) + 1);
    return f32(num / den);
  }
  // the tails: min(p, 1 - p) = n / 2^24, and -ln of it is at most 16.7 (PPND7's second range)
  const n = 8388608 - Math.abs(m);
  const r = f32(f32(Math.sqrt(f32(-logScaled(n)))) - PPND7_TAIL);
  const den = f32(f32(horner(PPND7_D, r) * r) + 1);
  const z = f32(horner(PPND7_C, r) / den);
  return m < 0 ? -z : z;
}
