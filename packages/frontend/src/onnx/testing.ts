import { ATTR_TYPE, AttributeProto, GraphProto, ModelProto, NodeProto, ONNX_DTYPE, TensorProto, ValueInfoProto, encodeModel } from './proto.js';

/**
 * Builds small ONNX models in memory for tests (and benchmarks): nodes, typed inputs/outputs and
 * initializers, encoded with the same protobuf schema the importer reads.
 */

export type AttrInit =
  | number
  | string
  | readonly number[]
  | { readonly float: number }
  | { readonly floats: readonly number[] }
  | { readonly strings: readonly string[] }
  | { readonly tensor: TensorProto }
  | { readonly graph: GraphProto };

export interface NodeSpec {
  readonly op: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  readonly name?: string;
  readonly domain?: string;
  /** Integers become INT/INTS, non-integers FLOAT, strings STRING; wrap to force a kind. */
  readonly attrs?: Readonly<Record<string, AttrInit>>;
}

export interface ValueSpec {
  readonly name: string;
  /** ONNX data type number (ONNX_DTYPE). */
  readonly type: number;
  /** Numbers are fixed sizes, strings symbolic ones; absent: no shape information. */
  readonly shape?: readonly (number | string)[];
}

export interface ModelSpec {
  readonly nodes: readonly NodeSpec[];
  readonly inputs: readonly ValueSpec[];
  readonly outputs: readonly ValueSpec[];
  readonly initializers?: readonly TensorProto[];
  /** Default-domain opset (default 17). */
  readonly opset?: number;
  readonly irVersion?: number;
  readonly graphName?: string;
}

const enc = new TextEncoder();

function attribute(name: string, v: AttrInit): AttributeProto {
  if (typeof v === 'number') {
    return Number.isInteger(v) ? { name, type: ATTR_TYPE.INT, i: v } : { name, type: ATTR_TYPE.FLOAT, f: v };
  }
  if (typeof v === 'string') return { name, type: ATTR_TYPE.STRING, s: enc.encode(v) };
  if (Array.isArray(v)) return { name, type: ATTR_TYPE.INTS, ints: [...(v as number[])] };
  const o = v as Exclude<AttrInit, number | string | readonly number[]>;
  if ('float' in o) return { name, type: ATTR_TYPE.FLOAT, f: o.float };
  if ('floats' in o) return { name, type: ATTR_TYPE.FLOATS, floats: [...o.floats] };
  if ('strings' in o) return { name, type: ATTR_TYPE.STRINGS, strings: o.strings.map((s) => enc.encode(s)) };
  if ('graph' in o) return { name, type: ATTR_TYPE.GRAPH, g: o.graph };
  return { name, type: ATTR_TYPE.TENSOR, t: o.tensor };
}

export function node(spec: NodeSpec): NodeProto {
  return {
    opType: spec.op,
    input: [...spec.inputs],
    output: [...spec.outputs],
    ...(spec.name !== undefined ? { name: spec.name } : {}),
    ...(spec.domain !== undefined ? { domain: spec.domain } : {}),
    attribute: Object.entries(spec.attrs ?? {}).map(([k, v]) => attribute(k, v)),
  };
}

export function valueInfo(v: ValueSpec): ValueInfoProto {
  return {
    name: v.name,
    type: {
      tensorType: {
        elemType: v.type,
        ...(v.shape ? { shape: { dim: v.shape.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) } } : {}),
      },
    },
  };
}

/** A TensorProto with its values in the typed field for `type` (raw: little-endian raw_data instead). */
export function tensor(name: string, type: number, dims: readonly number[], values: readonly number[], raw = false): TensorProto {
  const base: TensorProto = { name, dataType: type, dims: [...dims] };
  if (raw) return { ...base, rawData: rawBytes(type, values) };
  switch (type) {
    case ONNX_DTYPE.FLOAT:
      return { ...base, floatData: [...values] };
    case ONNX_DTYPE.DOUBLE:
      return { ...base, doubleData: [...values] };
    case ONNX_DTYPE.INT64:
      return { ...base, int64Data: [...values] };
    case ONNX_DTYPE.UINT32:
    case ONNX_DTYPE.UINT64:
      return { ...base, uint64Data: [...values] };
    default:
      return { ...base, int32Data: [...values] };
  }
}

/** Little-endian bytes of values stored as `type`. */
export function rawBytes(type: number, values: readonly number[]): Uint8Array {
  const n = values.length;
  switch (type) {
    case ONNX_DTYPE.FLOAT:
      return new Uint8Array(Float32Array.from(values).buffer);
    case ONNX_DTYPE.DOUBLE:
      return new Uint8Array(Float64Array.from(values).buffer);
    case ONNX_DTYPE.INT32:
      return new Uint8Array(Int32Array.from(values).buffer);
    case ONNX_DTYPE.INT64:
      return new Uint8Array(BigInt64Array.from(values.map((v) => BigInt(v))).buffer);
    case ONNX_DTYPE.BOOL:
    case ONNX_DTYPE.UINT8:
      return Uint8Array.from(values);
    case ONNX_DTYPE.INT8:
      return new Uint8Array(Int8Array.from(values).buffer);
    default:
      throw new Error(`rawBytes: type ${type} is not handled (${n} values)`);
  }
}

export function modelProto(spec: ModelSpec): ModelProto {
  return {
    irVersion: spec.irVersion ?? 8,
    producerName: 'tilegraph-tests',
    opsetImport: [{ domain: '', version: spec.opset ?? 17 }],
    graph: {
      name: spec.graphName ?? 'test',
      node: spec.nodes.map(node),
      input: spec.inputs.map(valueInfo),
      output: spec.outputs.map(valueInfo),
      initializer: [...(spec.initializers ?? [])],
    },
  };
}

/** The encoded bytes of a model. */
export function makeModel(spec: ModelSpec): Uint8Array {
  return encodeModel(modelProto(spec));
}
