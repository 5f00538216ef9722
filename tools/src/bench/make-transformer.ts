import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ONNX_DTYPE, encodeModel, onnxTesting } from '@tilegraph/frontend';

type NodeSpec = onnxTesting.NodeSpec;

/**
 * Writes a BERT-base-like transformer encoder as ONNX (opset 17) with random weights: `layers`
 * blocks of multi-head self-attention and a GELU MLP, each with LayerNormalization, in the node
 * pattern PyTorch's exporter produces (MatMul + Add, Reshape/Transpose per head, Softmax, Erf GELU).
 */

export interface TransformerSpec {
  layers: number;
  hidden: number;
  heads: number;
  ffn: number;
  seq: number;
  seed: number;
}

export const BERT_BASE: TransformerSpec = { layers: 12, hidden: 768, heads: 12, ffn: 3072, seq: 128, seed: 1 };

/** xorshift32 uniform values in [-a, a): enough randomness for benchmark weights, and fast. */
function randomWeights(n: number, scale: number, state: { s: number }): Uint8Array {
  const out = new Float32Array(n);
  let s = state.s;
  for (let i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    out[i] = ((s >>> 0) / 4294967296 - 0.5) * 2 * scale;
  }
  state.s = s;
  return new Uint8Array(out.buffer);
}

export function transformerModel(spec: TransformerSpec = BERT_BASE): Uint8Array {
  const { layers, hidden: d, heads: h, ffn, seq } = spec;
  const dh = d / h;
  const nodes: NodeSpec[] = [];
  const inits: ReturnType<typeof onnxTesting.tensor>[] = [];
  const rng = { s: spec.seed | 1 };
  const weight = (name: string, dims: number[], scale: number) => {
    inits.push({ name, dataType: ONNX_DTYPE.FLOAT, dims, rawData: randomWeights(dims.reduce((a, b) => a * b, 1), scale, rng) });
    return name;
  };
  const ints = (name: string, values: number[]) => {
    inits.push(onnxTesting.tensor(name, ONNX_DTYPE.INT64, [values.length], values));
    return name;
  };
  const scalar = (name: string, v: number) => {
    inits.push(onnxTesting.tensor(name, ONNX_DTYPE.FLOAT, [], [v]));
    return name;
  };
  const headsShape = ints('heads_shape', [0, seq, h, dh]);
  const mergedShape = ints('merged_shape', [0, seq, d]);
  const attnScale = scalar('attn_scale', 1 / Math.sqrt(dh));
  const half = scalar('half', 0.5);
  const one = scalar('one', 1);
  const sqrt2 = scalar('sqrt2', Math.SQRT2);
  const add = (op: string, inputs: string[], out: string, attrs: NodeSpec['attrs'] = {}) => {
    nodes.push({ op, inputs, outputs: [out], name: out, attrs });
    return out;
  };
  const linear = (x: string, p: string, din: number, dout: number) => {
    const w = weight(`${p}.weight`, [din, dout], 1 / Math.sqrt(din));
    const b = weight(`${p}.bias`, [dout], 0.02);
    return add('Add', [add('MatMul', [x, w], `${p}/MatMul`), b], `${p}/Add`);
  };
  const layerNorm = (x: string, p: string) =>
    add('LayerNormalization', [x, weight(`${p}.weight`, [d], 0.1), weight(`${p}.bias`, [d], 0.1)], `${p}/LayerNorm`, { axis: -1, epsilon: { float: 1e-12 } });

  let x = 'x';
  for (let l = 0; l < layers; l++) {
    const p = `layer${l}`;
    const split = (t: string, name: string, perm: number[]) => add('Transpose', [add('Reshape', [t, headsShape], `${p}/${name}/Reshape`)], `${p}/${name}/Transpose`, { perm });
    const q = split(linear(x, `${p}.attention.query`, d, d), 'q', [0, 2, 1, 3]);
    const k = split(linear(x, `${p}.attention.key`, d, d), 'k', [0, 2, 3, 1]);
    const v = split(linear(x, `${p}.attention.value`, d, d), 'v', [0, 2, 1, 3]);
    const scores = add('Mul', [add('MatMul', [q, k], `${p}/scores`), attnScale], `${p}/scaled`);
    const probs = add('Softmax', [scores], `${p}/softmax`, { axis: -1 });
    const ctx = add('MatMul', [probs, v], `${p}/context`);
    const merged = add('Reshape', [add('Transpose', [ctx], `${p}/merge/Transpose`, { perm: [0, 2, 1, 3] }), mergedShape], `${p}/merge/Reshape`);
    const attnOut = linear(merged, `${p}.attention.output`, d, d);
    const h1 = layerNorm(add('Add', [attnOut, x], `${p}/residual1`), `${p}.attention.norm`);
    const up = linear(h1, `${p}.mlp.up`, d, ffn);
    // GELU as exported: 0.5·x·(1 + erf(x/√2))
    const erf = add('Erf', [add('Div', [up, sqrt2], `${p}/gelu/Div`)], `${p}/gelu/Erf`);
    const gelu = add('Mul', [add('Mul', [up, add('Add', [erf, one], `${p}/gelu/Add`)], `${p}/gelu/Mul`), half], `${p}/gelu/Mul2`);
    const down = linear(gelu, `${p}.mlp.down`, ffn, d);
    x = layerNorm(add('Add', [down, h1], `${p}/residual2`), `${p}.mlp.norm`);
  }
  nodes.push({ op: 'Identity', inputs: [x], outputs: ['y'], name: 'output' });
  return encodeModel(
    onnxTesting.modelProto({
      opset: 17,
      graphName: 'transformer_encoder',
      nodes,
      inputs: [{ name: 'x', type: ONNX_DTYPE.FLOAT, shape: ['batch', seq, d] }],
      outputs: [{ name: 'y', type: ONNX_DTYPE.FLOAT, shape: ['batch', seq, d] }],
      initializers: inits,
    }),
  );
}

/** Writes the model into a new temporary folder and returns the file's path. */
export function writeTransformerOnnx(spec: TransformerSpec = BERT_BASE, dir?: string): string {
  const folder = dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-bench-'));
  const file = path.join(folder, 'transformer.onnx');
  fs.writeFileSync(file, transformerModel(spec));
  return file;
}
