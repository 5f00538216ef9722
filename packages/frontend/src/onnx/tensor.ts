import * as fs from 'node:fs';
import * as path from 'node:path';
import { DType, DiagnosticError, Location, Tensor, allocData, dtypeBits, halfBitsToFloat, shapeLimitProblem } from '@tilegraph/ir';
import { fail, unsupported } from './errors.js';
import { Int64, ONNX_DTYPE, TensorProto, bytesToString, int64, onnxDTypeName } from './proto.js';
import { ONNX_TO_IR, decodeCoded, irDTypeOf, isCodedDType, unpackCodes } from './tensor-codec.js';

/** ONNX tensor data → IR tensors (see tensor-codec.ts for the type mapping). */
export { irDTypeOf };

/** The IR dtype for an ONNX type, or an "unsupported" diagnostic naming `what`. */
export function requireIRDType(onnxType: number, what: string, loc?: Location): DType {
  const d = irDTypeOf(onnxType);
  if (!d) {
    if (onnxType === ONNX_DTYPE.UNDEFINED) fail(`${what} has no data type`, loc);
    unsupported(`${what} has data type ${onnxDTypeName(onnxType)}, which the IR does not support`, loc, [
      'supported: every ONNX numeric type but complex (float64, int64 and uint64 are narrowed to 32 bits)',
    ]);
  }
  return d;
}

/** Bits per element in raw_data for the ONNX types we read (4-bit and 2-bit types are packed). */
function rawElementBits(onnxType: number): number | undefined {
  switch (onnxType) {
    case ONNX_DTYPE.DOUBLE:
    case ONNX_DTYPE.INT64:
    case ONNX_DTYPE.UINT64:
      return 64;
    case ONNX_DTYPE.BOOL:
      return 8;
  }
  const d = ONNX_TO_IR[onnxType];
  return d === undefined ? undefined : dtypeBits(d);
}

/** Bytes of raw_data holding n elements of an ONNX type. */
function rawByteLength(onnxType: number, n: number): number {
  return Math.ceil((n * (rawElementBits(onnxType) ?? 0)) / 8);
}

export interface DecodedTensor {
  readonly tensor: Tensor;
  /** The exact values when narrowing saturated some of them (int64 → int32 etc.). */
  readonly wide?: Float64Array;
  /** Set when some value did not fit the IR dtype: describes the first such value. */
  readonly overflow?: string;
}

/** Dimensions of a tensor or value type, checked against the IR's shape limits (shapeLimitProblem). */
export function checkedDims(dims: readonly Int64[], what: string, loc?: Location): number[] {
  const out = dims.map(int64);
  const problem = shapeLimitProblem(out);
  if (problem) fail(`${what}: ${problem}`, loc);
  return out;
}

export interface TensorReadOptions {
  /** Where data_location = EXTERNAL files are looked up; absent: external data is refused. */
  readonly modelDir?: string;
  readonly loc?: Location;
}

/** Converts a TensorProto into an IR tensor (see irDTypeOf for the type mapping). */
export function tensorFromProto(t: TensorProto, what: string, opts: TensorReadOptions = {}): DecodedTensor {
  const loc = opts.loc;
  const type = t.dataType ?? 0;
  const dtype = requireIRDType(type, what, loc);
  const shape = checkedDims(t.dims ?? [], what, loc);
  const n = shape.reduce((a, b) => a * b, 1);
  if (t.segment) unsupported(`${what} is stored in segments, which the importer does not read`, loc);

  let raw: Uint8Array | undefined = t.rawData && t.rawData.length > 0 ? t.rawData : undefined;
  if (t.dataLocation === 1) raw = readExternalData(t, what, n, opts);
  if (raw) {
    const need = rawByteLength(type, n);
    if (raw.length !== need) {
      fail(`${what}: raw data has ${raw.length} bytes but shape [${shape.join(',')}] of ${onnxDTypeName(type)} needs ${need}`, loc);
    }
    return fromRaw(raw, type, dtype, shape, n);
  }
  return fromFields(t, type, dtype, shape, n, what, loc);
}

/** Copies little-endian raw bytes into an aligned buffer so typed arrays can view them. */
function aligned(raw: Uint8Array): ArrayBuffer {
  const buf = new ArrayBuffer(raw.length);
  new Uint8Array(buf).set(raw);
  return buf;
}

function fromRaw(raw: Uint8Array, type: number, dtype: DType, shape: number[], n: number): DecodedTensor {
  if (isCodedDType(dtype)) return { tensor: new Tensor(dtype, shape, decodeCoded(dtype, unpackCodes(raw, dtypeBits(dtype), n))) };
  switch (type) {
    case ONNX_DTYPE.FLOAT:
      return { tensor: new Tensor(dtype, shape, new Float32Array(aligned(raw))) };
    case ONNX_DTYPE.INT32:
      return { tensor: new Tensor(dtype, shape, new Int32Array(aligned(raw))) };
    case ONNX_DTYPE.UINT32:
      return { tensor: new Tensor(dtype, shape, new Uint32Array(aligned(raw))) };
    case ONNX_DTYPE.BOOL: {
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i++) out[i] = raw[i] ? 1 : 0;
      return { tensor: new Tensor(dtype, shape, out) };
    }
    case ONNX_DTYPE.FLOAT16: {
      const bits = new Uint16Array(aligned(raw));
      const out = new Float32Array(n);
      for (let i = 0; i < n; i++) out[i] = halfBitsToFloat(bits[i]!);
      return { tensor: new Tensor(dtype, shape, out) };
    }
    case ONNX_DTYPE.DOUBLE:
      return narrowFloat(new Float64Array(aligned(raw)), shape);
    case ONNX_DTYPE.INT64: {
      const words = new Int32Array(aligned(raw));
      const exact = new Float64Array(n);
      for (let i = 0; i < n; i++) exact[i] = words[2 * i + 1]! * 4294967296 + (words[2 * i]! >>> 0);
      return narrowInt(exact, 'int32', shape);
    }
    case ONNX_DTYPE.UINT64: {
      const words = new Uint32Array(aligned(raw));
      const exact = new Float64Array(n);
      for (let i = 0; i < n; i++) exact[i] = words[2 * i + 1]! * 4294967296 + words[2 * i]!;
      return narrowInt(exact, 'uint32', shape);
    }
  }
  throw new Error(`unhandled ONNX type ${type}`);
}

function fromFields(t: TensorProto, type: number, dtype: DType, shape: number[], n: number, what: string, loc?: Location): DecodedTensor {
  const field = (name: string, xs: ArrayLike<unknown> | null | undefined, count = n): ArrayLike<unknown> => {
    const got = xs?.length ?? 0;
    if (got !== count) fail(`${what} has ${got} values in ${name} but shape [${shape.join(',')}] needs ${count}`, loc);
    return xs ?? [];
  };
  if (isCodedDType(dtype)) {
    // int32_data holds one element per entry, or for 4-bit and 2-bit types one packed byte per entry
    const bits = dtypeBits(dtype);
    const perEntry = bits < 8 ? 8 / bits : 1;
    const xs = field('int32_data', t.int32Data, Math.ceil(n / perEntry)) as ArrayLike<number>;
    const codes = perEntry === 1 ? Uint32Array.from(xs, (v) => v >>> 0) : unpackCodes(Uint8Array.from(xs, (v) => v & 0xff), bits, n);
    return { tensor: new Tensor(dtype, shape, decodeCoded(dtype, codes)) };
  }
  switch (type) {
    case ONNX_DTYPE.FLOAT: {
      const xs = field('float_data', t.floatData) as ArrayLike<number>;
      return { tensor: new Tensor(dtype, shape, Float32Array.from(xs)) };
    }
    case ONNX_DTYPE.DOUBLE: {
      const xs = field('double_data', t.doubleData) as ArrayLike<number>;
      return narrowFloat(Float64Array.from(xs), shape);
    }
    case ONNX_DTYPE.FLOAT16: {
      const xs = field('int32_data', t.int32Data) as ArrayLike<number>;
      const out = allocData(dtype, n);
      for (let i = 0; i < n; i++) out[i] = halfBitsToFloat(xs[i]! & 0xffff);
      return { tensor: new Tensor(dtype, shape, out) };
    }
    case ONNX_DTYPE.BOOL: {
      const xs = field('int32_data', t.int32Data) as ArrayLike<number>;
      const out = new Uint8Array(n);
      for (let i = 0; i < n; i++) out[i] = xs[i] ? 1 : 0;
      return { tensor: new Tensor(dtype, shape, out) };
    }
    case ONNX_DTYPE.INT32: {
      const xs = field('int32_data', t.int32Data) as ArrayLike<number>;
      return { tensor: new Tensor(dtype, shape, Int32Array.from(xs, (v) => v | 0)) };
    }
    case ONNX_DTYPE.INT64: {
      const xs = field('int64_data', t.int64Data) as ArrayLike<Int64>;
      const exact = new Float64Array(n);
      for (let i = 0; i < n; i++) exact[i] = int64(xs[i]);
      return narrowInt(exact, 'int32', shape);
    }
    case ONNX_DTYPE.UINT32:
    case ONNX_DTYPE.UINT64: {
      const xs = field('uint64_data', t.uint64Data) as ArrayLike<Int64>;
      const exact = new Float64Array(n);
      for (let i = 0; i < n; i++) {
        const x = xs[i];
        exact[i] = typeof x === 'number' ? x : x ? Number(BigInt.asUintN(64, BigInt(x.toString()))) : 0;
      }
      return narrowInt(exact, 'uint32', shape);
    }
  }
  throw new Error(`unhandled ONNX type ${type}`);
}

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;

function narrowInt(exact: Float64Array, dtype: 'int32' | 'uint32', shape: number[]): DecodedTensor {
  const lo = dtype === 'int32' ? INT32_MIN : 0;
  const hi = dtype === 'int32' ? INT32_MAX : 2 ** 32 - 1;
  const out = dtype === 'int32' ? new Int32Array(exact.length) : new Uint32Array(exact.length);
  let overflow: string | undefined;
  for (let i = 0; i < exact.length; i++) {
    const v = exact[i]!;
    if (v < lo || v > hi) {
      overflow ??= `value ${v} at index ${i} does not fit ${dtype}`;
      out[i] = v < lo ? lo : hi;
    } else out[i] = v;
  }
  const tensor = new Tensor(dtype, shape, out);
  return overflow ? { tensor, wide: exact, overflow } : { tensor };
}

const FLOAT32_MAX = 3.4028234663852886e38;

function narrowFloat(exact: Float64Array, shape: number[]): DecodedTensor {
  const out = new Float32Array(exact.length);
  let overflow: string | undefined;
  for (let i = 0; i < exact.length; i++) {
    const v = exact[i]!;
    if (Number.isFinite(v) && Math.abs(v) > FLOAT32_MAX) overflow ??= `value ${v} at index ${i} does not fit float32`;
    out[i] = v;
  }
  const tensor = new Tensor('float32', shape, out);
  return overflow ? { tensor, wide: exact, overflow } : { tensor };
}

/**
 * Reads the bytes of an external-data tensor. The file must lie inside the model's folder (no
 * absolute paths, no `..`, no symbolic link leading out), and offset/length must lie inside it.
 */
function readExternalData(t: TensorProto, what: string, n: number, opts: TensorReadOptions): Uint8Array {
  const loc = opts.loc;
  const entries = new Map<string, string>();
  for (const e of t.externalData ?? []) entries.set(e.key ?? '', e.value ?? '');
  const location = entries.get('location');
  if (!location) fail(`${what} has external data without a location`, loc);
  if (opts.modelDir === undefined) {
    fail(`${what} keeps its data in the external file '${location}', but no model folder is known`, loc, [
      'import the model from a file (importOnnxFile) or pass modelDir',
    ]);
  }
  const refuse = (why: string): never =>
    fail(`${what}: external data location '${location}' is refused: ${why}`, loc, ['external data files must lie inside the model folder']);
  if (location.includes('\0')) refuse('it contains a NUL character');
  if (path.isAbsolute(location) || path.win32.isAbsolute(location)) refuse('it is an absolute path');
  if (location.split(/[\\/]+/).includes('..')) refuse('it leads out of the model folder');

  let dirReal: string;
  let fileReal: string;
  try {
    dirReal = fs.realpathSync(opts.modelDir);
  } catch {
    return fail(`${what}: model folder '${opts.modelDir}' cannot be read`, loc);
  }
  const full = path.resolve(dirReal, location);
  try {
    fileReal = fs.realpathSync(full);
  } catch {
    return fail(`${what}: external data file '${location}' does not exist in ${dirReal}`, loc);
  }
  const rel = path.relative(dirReal, fileReal);
  if (rel.startsWith('..') || path.isAbsolute(rel)) refuse('it resolves (through a symbolic link) to a file outside the model folder');

  const num = (key: string): number | undefined => {
    const s = entries.get(key);
    if (s === undefined || s === '') return undefined;
    if (!/^\d+$/.test(s)) fail(`${what}: external data ${key} '${s}' is not a non-negative integer`, loc);
    return Number(s);
  };
  let size: number;
  let fd: number | undefined;
  try {
    // without blocking: a FIFO put there must not stall the import (it is refused just below)
    fd = fs.openSync(fileReal, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0));
    const st = fs.fstatSync(fd);
    if (!st.isFile()) refuse('it is not a regular file');
    size = st.size;
    const offset = num('offset') ?? 0;
    const length = num('length') ?? size - offset;
    if (!Number.isSafeInteger(offset + length) || offset + length > size || length < 0) {
      fail(`${what}: external data range offset ${offset}, length ${length} lies outside '${location}' (${size} bytes)`, loc);
    }
    const need = rawByteLength(t.dataType ?? 0, n);
    if (length !== need) {
      fail(`${what}: external data has ${length} bytes but its shape and type need ${need}`, loc);
    }
    const buf = new Uint8Array(length);
    let done = 0;
    while (done < length) {
      const k = fs.readSync(fd, buf, done, length - done, offset + done);
      if (k <= 0) fail(`${what}: external data file '${location}' ended early`, loc);
      done += k;
    }
    return buf;
  } catch (e) {
    if (e instanceof DiagnosticError) throw e;
    return fail(`${what}: cannot read external data file '${location}': ${(e as Error).message}`, loc);
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/** Name of a TensorProto for messages. */
export function tensorName(t: TensorProto, fallback: string): string {
  return t.name ? `'${t.name}'` : fallback;
}

export { bytesToString };
