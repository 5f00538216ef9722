import {
  DType,
  LowFloatDType,
  NarrowIntDType,
  Tensor,
  TensorData,
  allocData,
  dtypeBits,
  float32ToHalfBits,
  isLowFloat,
  isNarrowInt,
  narrowElementFromBits,
  narrowElementToBits,
} from '@tilegraph/ir';
import { ONNX_DTYPE, TensorProto } from './proto.js';

/**
 * The bit codes of ONNX's narrow integer and low-precision float types. ONNX keeps these as
 * little-endian codes of their width; 4-bit types pack two per byte and 2-bit types four per
 * byte, the first element in the lowest bits.
 */

export type CodedDType = NarrowIntDType | LowFloatDType;

/** Types ONNX stores as bit codes of their own width. */
export function isCodedDType(t: DType): t is CodedDType {
  return isNarrowInt(t) || isLowFloat(t);
}

/** The first n codes of `bits` bits each in little-endian packed bytes. */
export function unpackCodes(bytes: Uint8Array, bits: number, n: number): Uint32Array {
  const out = new Uint32Array(n);
  if (bits === 16) {
    for (let i = 0; i < n; i++) out[i] = bytes[2 * i]! | (bytes[2 * i + 1]! << 8);
    return out;
  }
  const perByte = 8 / bits;
  const mask = (1 << bits) - 1;
  for (let i = 0; i < n; i++) out[i] = (bytes[Math.floor(i / perByte)]! >>> ((i % perByte) * bits)) & mask;
  return out;
}

/** Codes of `bits` bits each packed into little-endian bytes (a partly used last byte is zero-filled). */
export function packCodes(codes: ArrayLike<number>, bits: number): Uint8Array {
  const n = codes.length;
  if (bits === 16) {
    const out = new Uint8Array(2 * n);
    for (let i = 0; i < n; i++) {
      out[2 * i] = codes[i]! & 0xff;
      out[2 * i + 1] = (codes[i]! >>> 8) & 0xff;
    }
    return out;
  }
  const perByte = 8 / bits;
  const mask = (1 << bits) - 1;
  const out = new Uint8Array(Math.ceil(n / perByte));
  for (let i = 0; i < n; i++) out[Math.floor(i / perByte)]! |= (codes[i]! & mask) << ((i % perByte) * bits);
  return out;
}

/** Stored values of codes of a coded type. */
export function decodeCoded(t: CodedDType, codes: ArrayLike<number>): TensorData {
  const out = allocData(t, codes.length);
  for (let i = 0; i < codes.length; i++) out[i] = narrowElementFromBits(t, codes[i]!);
  return out;
}

/**
 * ONNX types and the IR types that hold them. Most ONNX types have an IR type of their own
 * (ONNX_TO_IR); the wide ones are narrowed:
 * - int64 → int32 and float64 → float32 (values that do not fit saturate; the importer warns
 *   when such a value reaches the imported graph),
 * - uint64 → uint32 (likewise).
 * Strings and complex numbers have no IR type.
 */
export const ONNX_TO_IR: Readonly<Record<number, DType>> = {
  [ONNX_DTYPE.FLOAT]: 'float32',
  [ONNX_DTYPE.FLOAT16]: 'float16',
  [ONNX_DTYPE.INT32]: 'int32',
  [ONNX_DTYPE.UINT32]: 'uint32',
  [ONNX_DTYPE.BOOL]: 'bool',
  [ONNX_DTYPE.INT8]: 'int8',
  [ONNX_DTYPE.UINT8]: 'uint8',
  [ONNX_DTYPE.INT16]: 'int16',
  [ONNX_DTYPE.UINT16]: 'uint16',
  [ONNX_DTYPE.INT4]: 'int4',
  [ONNX_DTYPE.UINT4]: 'uint4',
  [ONNX_DTYPE.INT2]: 'int2',
  [ONNX_DTYPE.UINT2]: 'uint2',
  [ONNX_DTYPE.BFLOAT16]: 'bfloat16',
  [ONNX_DTYPE.FLOAT8E4M3FN]: 'float8e4m3fn',
  [ONNX_DTYPE.FLOAT8E4M3FNUZ]: 'float8e4m3fnuz',
  [ONNX_DTYPE.FLOAT8E5M2]: 'float8e5m2',
  [ONNX_DTYPE.FLOAT8E5M2FNUZ]: 'float8e5m2fnuz',
  [ONNX_DTYPE.FLOAT8E8M0]: 'float8e8m0',
  [ONNX_DTYPE.FLOAT4E2M1]: 'float4e2m1',
};
const NARROWED: Readonly<Record<number, DType>> = {
  [ONNX_DTYPE.DOUBLE]: 'float32',
  [ONNX_DTYPE.INT64]: 'int32',
  [ONNX_DTYPE.UINT64]: 'uint32',
};
const IR_TO_ONNX: Readonly<Partial<Record<DType, number>>> = Object.fromEntries(Object.entries(ONNX_TO_IR).map(([k, v]) => [v, Number(k)]));

export function irDTypeOf(onnxType: number): DType | undefined {
  return ONNX_TO_IR[onnxType] ?? NARROWED[onnxType];
}

/** The ONNX type of an IR dtype (UNDEFINED for float64, which ONNX models do not carry as such). */
export function onnxTypeOf(t: DType): number {
  return IR_TO_ONNX[t] ?? ONNX_DTYPE.UNDEFINED;
}

/** The little-endian raw_data bytes of a tensor as ONNX stores its type. */
export function rawDataOf(t: Tensor): Uint8Array {
  const d = t.data;
  const n = d.length;
  const dtype = t.dtype;
  if (isCodedDType(dtype)) return packCodes(Uint32Array.from(d, (x) => narrowElementToBits(dtype, x)), dtypeBits(dtype));
  switch (dtype) {
    case 'float16':
      return packCodes(Uint32Array.from(d, (x) => float32ToHalfBits(x)), 16);
    case 'bool':
      return Uint8Array.from(d, (x) => (x ? 1 : 0));
    case 'float32':
      return new Uint8Array(Float32Array.from(d).buffer);
    case 'float64':
      return new Uint8Array(Float64Array.from(d).buffer);
    case 'int32':
      return new Uint8Array(Int32Array.from(d).buffer);
    case 'uint32':
      return new Uint8Array(Uint32Array.from(d).buffer);
  }
  throw new Error(`no ONNX encoding for ${String(dtype)} (${n} elements)`);
}

/** A TensorProto holding `t` as raw data of its ONNX type (the inverse of tensorFromProto). */
export function tensorToProto(t: Tensor, name: string): TensorProto {
  return { name, dataType: t.dtype === 'float64' ? ONNX_DTYPE.DOUBLE : onnxTypeOf(t.dtype), dims: [...t.shape], rawData: rawDataOf(t) };
}
