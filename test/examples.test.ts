import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadModelFile } from '@tilegraph/frontend';
import { Tensor, verifyGraph } from '@tilegraph/ir';
import { runGraph } from '@tilegraph/runtime';

/**
 * The example model files against the PyTorch oracles: with the oracle's parameters loaded by
 * name, each example's logits equal the recorded PyTorch forward pass of the batch of 4, and its
 * loss the recorded mean cross-entropy. Parameter names and order equal the oracle's
 * `param_names` (PyTorch state-dict names).
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const EXAMPLES = path.resolve(here, '../examples');
const ORACLES = path.resolve(here, '../../shared/oracles');
const present = fs.existsSync(path.join(ORACLES, 'index.json'));
if (!present) console.log(`examples: oracle checks skipped, ${ORACLES} is absent`);
const describeIfOracles = present ? describe : describe.skip;

interface JsonTensor {
  shape: number[];
  dtype: string;
  data: number[];
}

function close(got: Tensor, want: JsonTensor, atol: number, rtol: number): string | undefined {
  if (got.shape.join(',') !== want.shape.join(',')) return `shape [${got.shape}] != [${want.shape}]`;
  for (let i = 0; i < want.data.length; i++) {
    const g = got.data[i]!;
    const w = want.data[i]!;
    if (!(Math.abs(g - w) <= atol + rtol * Math.abs(w))) return `element ${i}: ${g} != ${w}`;
  }
  return undefined;
}

describeIfOracles('example models match the PyTorch oracles', () => {
  for (const model of ['mlp', 'mlp_tanh', 'cnn']) {
    test(`${model}.tg`, () => {
      const fixture = JSON.parse(fs.readFileSync(path.join(ORACLES, `${model}.json`), 'utf8'));
      const g = loadModelFile(path.join(EXAMPLES, `${model}.tg`));
      expect(verifyGraph(g)).toEqual([]);
      // the trained parameters, then (like torch's state_dict) the batch-norm buffers
      const buffers = Object.keys(fixture.buffers ?? {});
      const names = g.parameters().map((p) => p.attrs['name'] as string);
      expect(names.filter((n) => !buffers.includes(n))).toEqual(fixture.param_names);
      expect(names.filter((n) => buffers.includes(n)).sort()).toEqual([...buffers].sort());

      const parameters: Record<string, Tensor> = {};
      for (const [name, t] of Object.entries(fixture.params as Record<string, JsonTensor>)) parameters[name] = Tensor.from('float32', t.shape, t.data);
      const x = Tensor.from('float32', fixture.inputs.x.shape, fixture.inputs.x.data);
      const y = Tensor.from('int32', fixture.inputs.y.shape, fixture.inputs.y.data);
      const { outputs } = runGraph(g, { x, y }, { parameters });

      expect(close(outputs['logits']!, fixture.forward, 1e-5, 1e-4)).toBeUndefined();
      expect(outputs['loss']!.shape).toEqual([]);
      expect(Math.abs(outputs['loss']!.data[0]! - fixture.loss)).toBeLessThanOrEqual(1e-5 * Math.abs(fixture.loss));
    });
  }
});

describe('transformer example', () => {
  test('elaborates and runs: per-layer pipeline placement, torch parameter names', () => {
    const g = loadModelFile(path.join(EXAMPLES, 'transformer.tg'));
    expect(verifyGraph(g)).toEqual([]);
    const names = g.parameters().map((p) => p.attrs['name'] as string);
    expect(names.slice(0, 4)).toEqual([
      'encoder.layers.0.self_attn.in_proj_weight',
      'encoder.layers.0.self_attn.in_proj_bias',
      'encoder.layers.0.self_attn.out_proj.weight',
      'encoder.layers.0.self_attn.out_proj.bias',
    ]);
    // 12 tensors per encoder layer (attention 4, norms 4, feed-forward 4), two layers, the head 2.
    expect(names.length).toBe(26);
    expect(new Set(g.ops.filter((o) => o.annotations.block === 'encoder').map((o) => o.annotations.ipu))).toEqual(new Set([0, 1]));
    const x = Tensor.from('float32', [4, 8, 16], Array.from({ length: 4 * 8 * 16 }, (_, i) => Math.sin(i)));
    const y = Tensor.from('int32', [4], [0, 1, 2, 3]);
    const { outputs } = runGraph(g, { x, y });
    expect(outputs['logits']!.shape).toEqual([4, 5]);
    expect(outputs['logits']!.toArray().every(Number.isFinite)).toBe(true);
    expect(outputs['loss']!.shape).toEqual([]);
  });
});
