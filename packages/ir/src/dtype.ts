/**
 * Element types of the IR. float64 is a host-only type (reference interpreter, gradient checks,
 * float64 oracles); the device types are float32, float16, int32, uint32 and bool. ONNX int64 is
 * narrowed to int32 at import.
 */
export type DType = 'float32' | 'float16' | 'float64' | 'int32' | 'uint32' | 'bool';

export const DTYPES: readonly DType[] = ['float32', 'float16', 'float64', 'int32', 'uint32', 'bool'];

/** Short spellings used by the text IR and diagnostics. */
const SHORT: Record<DType, string> = {
  float32: 'f32',
  float16: 'f16',
  float64: 'f64',
  int32: 'i32',
  uint32: 'u32',
  bool: 'bool',
};
const FROM_SHORT: Record<string, DType> = Object.fromEntries(
  Object.entries(SHORT).map(([k, v]) => [v, k as DType]),
);

export function dtypeShortName(t: DType): string {
  return SHORT[t];
}

/** Accepts both spellings ("f32" and "float32"); undefined when unknown. */
export function parseDType(s: string): DType | undefined {
  if (s in SHORT) return s as DType;
  return FROM_SHORT[s];
}

export function isFloat(t: DType): boolean {
  return t === 'float32' || t === 'float16' || t === 'float64';
}
export function isInteger(t: DType): boolean {
  return t === 'int32' || t === 'uint32';
}
export function isNumeric(t: DType): boolean {
  return t !== 'bool';
}

/** Bytes per element on the device. */
export function dtypeByteSize(t: DType): number {
  switch (t) {
    case 'float16':
      return 2;
    case 'float64':
      return 8;
    case 'bool':
      return 1;
    default:
      return 4;
  }
}

// ---- float16 rounding (IEEE binary16, round to nearest even) ----

const f32buf = new Float32Array(1);
const u32buf = new Uint32Array(f32buf.buffer);

/** Bits of the nearest binary16 value to x (x is first rounded to float32, as hardware does). */
export function float32ToHalfBits(x: number): number {
  f32buf[0] = x;
  const f = u32buf[0]!;
  const sign = (f >>> 16) & 0x8000;
  const exp = (f >>> 23) & 0xff;
  let mant = f & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0); // inf / nan
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow -> inf
  if (e <= 0) {
    if (e < -10) return sign; // underflow -> signed zero
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && (half & 1))) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && (half & 1))) half++; // may carry into exponent: still correct
  return sign | half;
}

export function halfBitsToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** Rounds a number to the nearest float16 value. */
export function roundToHalf(x: number): number {
  return halfBitsToFloat(float32ToHalfBits(x));
}

/** Largest finite float16 value. */
export const HALF_MAX = 65504;

/** Types the device (and so the code generator) supports. */
export const DEVICE_DTYPES: readonly DType[] = ['float32', 'float16', 'int32', 'uint32', 'bool'];
