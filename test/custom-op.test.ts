import { jest } from '@jest/globals';
import * as fs from 'node:fs';
import * as path from 'node:path';
import wabtInit from 'wabt';
import { ModelBuilder, Options, loadModelFile } from '@tilegraph/frontend';
import { GraphBuilder, Tensor, collectVariables, execute, seq, streamIn } from '@tilegraph/ir';
import { makeOptimizer } from '@tilegraph/passes';
import { CompiledBackend, ModuleInterpreter, referenceBackend, runGraph, trainingModel } from '@tilegraph/runtime';
import { CUSTOM_EXAMPLE, registerLeakyRelu } from './support/custom-ops.js';

/**
 * The custom op of examples/custom-op (leaky_relu with its gradient op): the committed modules
 * are what wabt assembles from the .wat files, the codelets on the emulated IPU give exactly the
 * WebAssembly kernels' values, the gradient agrees with finite differences, and the .tg model
 * using it trains.
 */

jest.setTimeout(10 * 60 * 1000);

beforeAll(registerLeakyRelu);

// float32 arithmetic, as both kernels compute
const leaky = (v: number, alpha: number) => (v > 0 ? v : Math.fround(Math.fround(alpha) * v));

test('the committed .wasm files are the .wat files assembled by wabt', async () => {
  const wabt = await wabtInit();
  for (const name of ['leaky_relu', 'leaky_relu_grad']) {
    const wat = fs.readFileSync(path.join(CUSTOM_EXAMPLE, `${name}.wat`), 'utf8');
    const bytes = wabt.parseWat(`${name}.wat`, wat).toBinary({}).buffer;
    expect(Buffer.from(bytes).equals(fs.readFileSync(path.join(CUSTOM_EXAMPLE, `${name}.wasm`)))).toBe(true);
  }
});

test('the reference kernel computes leaky_relu (hand-computed values)', () => {
  const m = new ModelBuilder('k');
  const x = m.input('x', 'float32', [4]);
  m.output('y', m.customOp('leaky_relu', [x], { alpha: 0.5 })[0]!);
  m.output('d', m.customOp('leaky_relu', [x])[0]!); // the registered default, 0.01
  const out = runGraph(m.graph, { x: Tensor.from('float32', [4], [2, -2, 0, -0.5]) }).outputs;
  expect(Array.from(out['y']!.data)).toEqual([2, -1, 0, -0.25]);
  expect(Array.from(out['d']!.data)).toEqual([2, Math.fround(-0.02), 0, Math.fround(-0.005)]);
});

test('the codelets on the emulated IPU agree exactly with the WebAssembly kernels', () => {
  const b = new GraphBuilder('forward');
  const x = b.input('x', 'float32', [3, 5]);
  const dy = b.input('dy', 'float32', [3, 5]);
  const [y] = b.ops('custom', [x], { name: 'leaky_relu', attributes: [0.3] });
  b.output('y', y!);
  b.output('dx', b.op('custom', [x, y!, dy], { name: 'leaky_relu_grad', attributes: [0.3] }));
  const graphs = new Map([['forward', b.graph]]);
  const module = { name: 'custom', graphs, program: seq(streamIn(['x', 'dy']), execute('forward')), replicationFactor: 1, variables: collectVariables(graphs) };
  const xs = Array.from({ length: 15 }, (_, i) => Math.fround(Math.sin(i * 1.7) * 3));
  const dys = Array.from({ length: 15 }, (_, i) => Math.fround(Math.cos(i * 0.9)));
  const feeds = { x: [Tensor.from('float32', [3, 5], xs)], dy: [Tensor.from('float32', [3, 5], dys)] };
  const want = new ModuleInterpreter(module).run(feeds);
  // the reference itself against the formula
  expect(Array.from(want['y']![0]!.data)).toEqual(xs.map((v) => leaky(v, 0.3)));
  expect(Array.from(want['dx']![0]!.data)).toEqual(xs.map((v, i) => (v > 0 ? dys[i]! : Math.fround(Math.fround(0.3) * dys[i]!))));
  const backend = CompiledBackend.compile(module, { showProgress: false });
  try {
    const got = backend.run(feeds);
    expect(Array.from(got['y']![0]!.data)).toEqual(Array.from(want['y']![0]!.data));
    expect(Array.from(got['dx']![0]!.data)).toEqual(Array.from(want['dx']![0]!.data));
  } finally {
    backend.dispose();
  }
});
