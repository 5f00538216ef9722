import onnxProto from 'onnx-proto';
import type { onnx } from 'onnx-proto';

/**
 * The ONNX protobuf schema, as static protobufjs code shipped by the `onnx-proto` package.
 * Messages from newer ONNX releases decode too: protobufjs skips fields it does not know and
 * keeps unknown enum numbers (new data types) as plain numbers.
 */
export const OnnxProto = onnxProto.onnx;

export type ModelProto = onnx.IModelProto;
export type GraphProto = onnx.IGraphProto;
export type NodeProto = onnx.INodeProto;
export type AttributeProto = onnx.IAttributeProto;
export type TensorProto = onnx.ITensorProto;
export type ValueInfoProto = onnx.IValueInfoProto;
export type TypeProto = onnx.ITypeProto;

/** protobufjs gives 64-bit integers as Long objects (or numbers when built without long.js). */
export interface LongLike {
  toNumber(): number;
  toString(): string;
  low: number;
  high: number;
  unsigned: boolean;
}
export type Int64 = number | LongLike | null | undefined;

/** A 64-bit protobuf integer as a JavaScript number; values past 2^53 lose precision (callers check). */
export function int64(x: Int64): number {
  if (x === null || x === undefined) return 0;
  if (typeof x === 'number') return x;
  return x.toNumber();
}

/** ONNX TensorProto.DataType numbers, including those newer than the bundled schema. */
export const ONNX_DTYPE = {
  UNDEFINED: 0,
  FLOAT: 1,
  UINT8: 2,
  INT8: 3,
  UINT16: 4,
  INT16: 5,
  INT32: 6,
  INT64: 7,
  STRING: 8,
  BOOL: 9,
  FLOAT16: 10,
  DOUBLE: 11,
  UINT32: 12,
  UINT64: 13,
  COMPLEX64: 14,
  COMPLEX128: 15,
  BFLOAT16: 16,
  FLOAT8E4M3FN: 17,
  FLOAT8E4M3FNUZ: 18,
  FLOAT8E5M2: 19,
  FLOAT8E5M2FNUZ: 20,
  UINT4: 21,
  INT4: 22,
  FLOAT4E2M1: 23,
  FLOAT8E8M0: 24,
  UINT2: 25,
  INT2: 26,
} as const;

const DTYPE_NAMES: Record<number, string> = Object.fromEntries(Object.entries(ONNX_DTYPE).map(([k, v]) => [v, k]));

export function onnxDTypeName(t: number): string {
  return DTYPE_NAMES[t] ?? `data type ${t}`;
}

/** AttributeProto.AttributeType numbers. */
export const ATTR_TYPE = {
  UNDEFINED: 0,
  FLOAT: 1,
  INT: 2,
  STRING: 3,
  TENSOR: 4,
  GRAPH: 5,
  FLOATS: 6,
  INTS: 7,
  STRINGS: 8,
  TENSORS: 9,
  GRAPHS: 10,
  SPARSE_TENSOR: 11,
  SPARSE_TENSORS: 12,
  TYPE_PROTO: 13,
  TYPE_PROTOS: 14,
} as const;

/** Decodes a ModelProto; throws whatever protobufjs throws on malformed bytes (the caller reports it). */
export function decodeModel(bytes: Uint8Array): ModelProto {
  return OnnxProto.ModelProto.decode(bytes);
}

export function decodeTensor(bytes: Uint8Array): TensorProto {
  return OnnxProto.TensorProto.decode(bytes);
}

export function encodeModel(m: ModelProto): Uint8Array {
  return OnnxProto.ModelProto.encode(OnnxProto.ModelProto.fromObject(m as Record<string, unknown>)).finish();
}

export function encodeTensor(t: TensorProto): Uint8Array {
  return OnnxProto.TensorProto.encode(OnnxProto.TensorProto.fromObject(t as Record<string, unknown>)).finish();
}

const utf8 = new TextDecoder('utf-8');
export function bytesToString(b: Uint8Array | string | null | undefined): string {
  if (b === null || b === undefined) return '';
  if (typeof b === 'string') return b;
  return utf8.decode(b);
}
