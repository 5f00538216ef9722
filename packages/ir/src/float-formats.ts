/**
 * Low-precision float storage formats (bfloat16, the float8 families, float8 e8m0, float4 e2m1)
 * as ONNX defines them. The host holds their values in float32 arrays, always rounded to a
 * representable value; these functions do the rounding and the bit encodings (for ONNX raw data
 * and the text IR's hex form).
 *
 * Rounding is to nearest, ties to even, after the value is first rounded to float32 (as a device
 * converting a float32 register would). Overflow follows ONNX Cast: with `saturate` (the default)
 * finite values beyond the largest finite value, and infinities, become ±max; without it they
 * become ±Inf where the format has infinities (e5m2) and NaN otherwise. The "fnuz" formats have no
 * negative zero (-0 → +0) and one NaN (the bit pattern of -0).
 */

export type LowFloatDType =
  | 'bfloat16'
  | 'float8e4m3fn'
  | 'float8e4m3fnuz'
  | 'float8e5m2'
  | 'float8e5m2fnuz'
  | 'float8e8m0'
  | 'float4e2m1';

export const LOW_FLOAT_DTYPES: readonly LowFloatDType[] = [
  'bfloat16',
  'float8e4m3fn',
  'float8e4m3fnuz',
  'float8e5m2',
  'float8e5m2fnuz',
  'float8e8m0',
  'float4e2m1',
];

/** Rounding of float8 e8m0 (a power of two): ONNX Cast's round_mode; `up` is its default. */
export type E8M0Rounding = 'up' | 'down' | 'nearest';

/** A sign–exponent–mantissa format with subnormals (every format here but bfloat16 and e8m0). */
interface MiniFloat {
  readonly bits: number;
  readonly mant: number;
  readonly bias: number;
  /** Largest finite value. */
  readonly max: number;
  /** How NaN and Inf are spelled: IEEE (all-ones exponent), fn (only S.1111.111 is NaN), uz (0x80 is NaN), none. */
  readonly specials: 'ieee' | 'fn' | 'uz' | 'none';
}

const MINI: Partial<Record<LowFloatDType, MiniFloat>> = {
  float8e4m3fn: { bits: 8, mant: 3, bias: 7, max: 448, specials: 'fn' },
  float8e4m3fnuz: { bits: 8, mant: 3, bias: 8, max: 240, specials: 'uz' },
  float8e5m2: { bits: 8, mant: 2, bias: 15, max: 57344, specials: 'ieee' },
  float8e5m2fnuz: { bits: 8, mant: 2, bias: 16, max: 57344, specials: 'uz' },
  float4e2m1: { bits: 4, mant: 1, bias: 1, max: 6, specials: 'none' },
};

export function isLowFloat(t: string): t is LowFloatDType {
  return (LOW_FLOAT_DTYPES as readonly string[]).includes(t);
}

/** Bits per element of a low-precision float format. */
export function lowFloatBits(t: LowFloatDType): number {
  return t === 'bfloat16' ? 16 : t === 'float4e2m1' ? 4 : 8;
}

/** floor(log2(a)) for a finite a > 0, exact (Math.log2 may be off by one near powers of two). */
function exponentOf(a: number): number {
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e--;
  else if (2 ** (e + 1) <= a) e++;
  return e;
}

function roundHalfEven(v: number): number {
  const f = Math.floor(v);
  const d = v - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function roundMini(f: MiniFloat, x: number, saturate: boolean): number {
  if (Number.isNaN(x)) return NaN;
  const neg = x < 0 || Object.is(x, -0);
  const a = Math.abs(Math.fround(x));
  let r: number;
  if (a === Infinity) {
    r = saturate ? f.max : f.specials === 'ieee' ? Infinity : NaN;
  } else {
    const emin = 1 - f.bias;
    const e = a === 0 ? emin : Math.max(exponentOf(a), emin);
    const q = 2 ** (e - f.mant);
    r = roundHalfEven(a / q) * q;
    if (r > f.max) r = saturate ? f.max : f.specials === 'ieee' ? Infinity : NaN;
  }
  if (r === 0 && f.specials === 'uz') return 0;
  return neg ? -r : r;
}

function roundBFloat16(x: number): number {
  f32[0] = x;
  const b = u32[0]!;
  if ((b & 0x7f800000) === 0x7f800000) return f32[0]!; // inf and NaN stay
  const lsb = (b >>> 16) & 1;
  u32[0] = ((b + 0x7fff + lsb) >>> 16) << 16;
  return f32[0]!;
}

function roundE8M0(x: number, saturate: boolean, mode: E8M0Rounding): number {
  if (Number.isNaN(x)) return NaN;
  // the format has no sign and no zero: the magnitude is rounded, zero to the smallest value
  const a = Math.abs(Math.fround(x));
  if (a === Infinity) return saturate ? 2 ** 127 : NaN;
  if (a === 0) return 2 ** -127;
  let e = exponentOf(a);
  const frac = a / 2 ** e; // in [1, 2)
  if (mode === 'up' ? frac > 1 : mode === 'nearest' ? frac >= 1.5 : false) e++;
  if (e < -127) return 2 ** -127;
  if (e > 127) return saturate ? 2 ** 127 : NaN;
  return 2 ** e;
}

export interface LowFloatRounding {
  /** ONNX Cast's saturate (float8 only): out-of-range values become ±max instead of Inf/NaN. */
  readonly saturate?: boolean;
  readonly e8m0Rounding?: E8M0Rounding;
}

/** The value of format `t` nearest to x (see the file comment for overflow, zero and NaN). */
export function roundToLowFloat(t: LowFloatDType, x: number, opts: LowFloatRounding = {}): number {
  const saturate = opts.saturate ?? true;
  if (t === 'bfloat16') return roundBFloat16(x);
  if (t === 'float8e8m0') return roundE8M0(x, saturate, opts.e8m0Rounding ?? 'up');
  if (t === 'float4e2m1') {
    // float4 has no NaN or Inf: ONNX saturates infinities and large values to ±6 whatever
    // `saturate` says, and NaN becomes 0 (as the ONNX backend tests expect)
    return Number.isNaN(x) ? 0 : roundMini(MINI.float4e2m1!, x, true);
  }
  return roundMini(MINI[t]!, x, saturate);
}

/** The value a bit pattern of format `t` stands for. */
export function lowFloatFromBits(t: LowFloatDType, code: number): number {
  if (t === 'bfloat16') {
    u32[0] = (code & 0xffff) << 16;
    return f32[0]!;
  }
  if (t === 'float8e8m0') return (code & 0xff) === 0xff ? NaN : 2 ** ((code & 0xff) - 127);
  const f = MINI[t]!;
  const mask = (1 << f.bits) - 1;
  code &= mask;
  const signBit = 1 << (f.bits - 1);
  const expBits = f.bits - 1 - f.mant;
  const E = (code >>> f.mant) & ((1 << expBits) - 1);
  const M = code & ((1 << f.mant) - 1);
  if (f.specials === 'uz' && code === signBit) return NaN;
  if (f.specials === 'fn' && (code & ~signBit) === (mask & ~signBit)) return NaN;
  if (f.specials === 'ieee' && E === (1 << expBits) - 1) return M ? NaN : code & signBit ? -Infinity : Infinity;
  const mag = E === 0 ? M * 2 ** (1 - f.bias - f.mant) : (1 + M / 2 ** f.mant) * 2 ** (E - f.bias);
  return code & signBit ? -mag : mag;
}

/** code tables for the 8-bit and 4-bit formats: value → bit pattern (built on first use). */
const ENCODE = new Map<LowFloatDType, Map<number, number>>();

/** The bit pattern of x in format `t` (x is rounded first, without saturation). */
export function lowFloatToBits(t: LowFloatDType, x: number): number {
  const v = roundToLowFloat(t, x, { saturate: false });
  if (t === 'bfloat16') {
    f32[0] = v;
    return u32[0]! >>> 16;
  }
  if (t === 'float8e8m0') return Number.isNaN(v) ? 0xff : exponentOf(v) + 127;
  const f = MINI[t]!;
  const signBit = 1 << (f.bits - 1);
  if (Number.isNaN(v)) return f.specials === 'uz' ? signBit : f.specials === 'fn' ? signBit - 1 : f.specials === 'ieee' ? 0x7e : 0;
  if (Object.is(v, -0)) return signBit;
  let table = ENCODE.get(t);
  if (!table) {
    table = new Map();
    // positive codes first so +0 wins over -0 (a Map treats them as one key)
    for (let c = 0; c < 1 << f.bits; c++) {
      const y = lowFloatFromBits(t, c);
      if (!Number.isNaN(y) && !table.has(y)) table.set(y, c);
    }
    ENCODE.set(t, table);
  }
  return table.get(v)!;
}
