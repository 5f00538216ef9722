import * as fs from 'node:fs';
import * as path from 'node:path';
import { DiagnosticError, Tensor, error, float32ToHalfBits, formatShape } from '@tilegraph/ir';
import { ModelProto, ONNX_DTYPE, TensorProto, decodeModel, encodeModel, int64, tensorFromProto } from '@tilegraph/frontend';
import { writeAtomic } from '../files.js';

/** ONNX files: the float initializers (the importer's parameters) read as weights, and written back. */

function readModel(file: string): ModelProto {
  let bytes: Uint8Array;
  try {
    bytes = fs.readFileSync(file);
  } catch (e) {
    throw new DiagnosticError(error(`cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`));
  }
  try {
    return decodeModel(bytes);
  } catch (e) {
    throw new DiagnosticError(error(`${file}: not a valid ONNX model (${(e as Error).message})`));
  }
}

const isFloatInit = (t: TensorProto) => t.dataType === ONNX_DTYPE.FLOAT || t.dataType === ONNX_DTYPE.FLOAT16;

/** The float initializers of an ONNX file by name: the values the importer gives its parameters. */
export function onnxInitializers(file: string): Record<string, Tensor> {
  const m = readModel(file);
  const out: Record<string, Tensor> = {};
  for (const t of m.graph?.initializer ?? []) {
    if (!t.name || !isFloatInit(t)) continue;
    out[t.name] = tensorFromProto(t, `${file}: initializer '${t.name}'`, { modelDir: path.dirname(path.resolve(file)) }).tensor;
  }
  return out;
}

/** Little-endian bytes of a float32 or float16 tensor, as an initializer's raw_data holds them. */
function rawBytes(t: Tensor): Uint8Array {
  const half = t.dtype === 'float16';
  const out = new Uint8Array(t.size * (half ? 2 : 4));
  const view = new DataView(out.buffer);
  for (let i = 0; i < t.size; i++) {
    if (half) view.setUint16(2 * i, float32ToHalfBits(t.data[i]!), true);
    else view.setFloat32(4 * i, t.data[i]!, true);
  }
  return out;
}

/**
 * Writes the ONNX model `src` to `dst` with the initializers named in `weights` replaced (inline
 * raw data; external data is brought into the file). Every weight must name a float initializer
 * of the same shape.
 */
export function writeOnnxWithWeights(src: string, dst: string, weights: Readonly<Record<string, Tensor>>): number {
  const m = readModel(src);
  const inits = new Map((m.graph?.initializer ?? []).map((t) => [t.name ?? '', t]));
  const problems: string[] = [];
  for (const [name, w] of Object.entries(weights)) {
    const t = inits.get(name);
    if (!t || !isFloatInit(t)) {
      problems.push(`'${name}' is not a float initializer of ${src}`);
      continue;
    }
    const dims = (t.dims ?? []).map(int64);
    const dtype = t.dataType === ONNX_DTYPE.FLOAT16 ? 'float16' : 'float32';
    if (dims.length !== w.shape.length || dims.some((d, i) => d !== w.shape[i]) || w.dtype !== dtype) {
      problems.push(`'${name}' is ${dtype}${formatShape(dims)} in ${src} but ${w.dtype}${formatShape(w.shape)} after training`);
    }
  }
  if (problems.length) throw new DiagnosticError(error(`cannot write the trained weights into ${dst}`, undefined, problems.slice(0, 10)));
  for (const [name, w] of Object.entries(weights)) {
    const t = inits.get(name)! as TensorProto & Record<string, unknown>;
    t.rawData = rawBytes(w);
    t.floatData = [];
    t.int32Data = [];
    t.externalData = [];
    t.dataLocation = 0;
  }
  writeAtomic(dst, encodeModel(m));
  return Object.keys(weights).length;
}
