import { jest } from '@jest/globals';
import { spawnSync } from 'node:child_process';
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
    backend.dispose?.();
  }
});

test('the gradient (the custom op leaky_relu_grad) agrees with finite differences', () => {
  // f(x) = Σ v·leaky_relu(x); inputs stay further than eps from the kink at 0
  const xs = [1.5, -0.7, 0.3, -2.2, 0.9, -0.15];
  const vs = [0.4, -1.1, 2.0, 0.6, -0.3, 1.7];
  const b = new GraphBuilder('g');
  const x = b.input('x', 'float32', [6]);
  const v = b.input('v', 'float32', [6]);
  const op = b.addOp('custom', [x], { name: 'leaky_relu', attributes: [0.2] });
  b.output('f', b.op('reduce_sum', [b.op('mul', [op.result, v])], { axes: [] }));
  const [gx] = op.def.grad !== undefined && op.def.grad !== 'none' ? op.def.grad({ b, op, inputs: [x], outputs: op.results, outputGrads: [v] }) : [];
  b.output('gx', gx!);
  const run = (at: number[]) => runGraph(b.graph, { x: Tensor.from('float32', [6], at), v: Tensor.from('float32', [6], vs) }).outputs;
  const analytic = Array.from(run(xs)['gx']!.data);
  const eps = 1e-2;
  xs.forEach((_, i) => {
    const f = (d: number) => run(xs.map((z, j) => (j === i ? z + d : z)))['f']!.data[0]!;
    const numeric = (f(eps) - f(-eps)) / (2 * eps);
    expect(Math.abs(analytic[i]! - numeric)).toBeLessThan(1e-3 * (1 + Math.abs(numeric)));
  });
  // and the values by hand: v where x > 0, 0.2·v elsewhere
  expect(analytic).toEqual(xs.map((z, i) => (z > 0 ? Math.fround(vs[i]!) : Math.fround(Math.fround(0.2) * Math.fround(vs[i]!)))));
});

/** Eight points of three classes, separable after the first layer. */
function batch() {
  const xs = [1, 0, 0, 0.5, 0, 1, 0, -0.5, 0, 0, 1, 0.2, 1, 0.2, 0, 0.4, 0.1, 1, 0.1, -0.3, 0, 0.1, 1, 0.1, -1, -1, 0, 0, 0, -1, -1, 0];
  return { x: Tensor.from('float32', [8, 4], xs), y: Tensor.from('int32', [8], [0, 1, 2, 0, 1, 2, 0, 0]) };
}

test('the .tg model with the custom op trains through its gradient (reference interpreter)', () => {
  const graph = loadModelFile(path.join(CUSTOM_EXAMPLE, 'leaky.tg'));
  const t = trainingModel(graph, new Options().randomSeed(3), makeOptimizer('SGD', { lr: 0.5 }), { backend: referenceBackend });
  try {
    const step = t.compiledModule().graphs.get('step')!;
    const customs = step.ops.filter((o) => o.kind === 'custom').map((o) => o.attrs['name']);
    expect(customs).toEqual(['leaky_relu', 'leaky_relu_grad']);
    const losses = Array.from({ length: 40 }, () => t.run(batch())['loss']!.data[0]!);
    expect(losses[39]!).toBeLessThan(0.3 * losses[0]!);
  } finally {
    t.dispose();
  }
});

test('training on the emulated IPU follows the reference step by step', () => {
  const graph = loadModelFile(path.join(CUSTOM_EXAMPLE, 'leaky.tg'));
  const make = (settings: object) => trainingModel(graph, new Options().randomSeed(3), makeOptimizer('SGD', { lr: 0.5 }), settings);
  const ref = make({ backend: referenceBackend });
  const dev = make({});
  try {
    for (let i = 0; i < 4; i++) {
      const want = ref.run(batch())['loss']!.data[0]!;
      expect(dev.run(batch())['loss']!.data[0]!).toBeCloseTo(want, 5);
    }
  } finally {
    ref.dispose();
    dev.dispose();
  }
});

test('the example script trains (on the reference interpreter, from the built packages)', () => {
  const r = spawnSync(process.execPath, [path.join(CUSTOM_EXAMPLE, 'train.mjs'), '--backend', 'reference', '--steps', '40'], { encoding: 'utf8', timeout: 120_000 });
  expect(r.stderr).toBe('');
  const losses = [...r.stdout.matchAll(/loss (\S+)/g)].map((m) => Number(m[1]));
  expect(losses.length).toBeGreaterThan(3);
  expect(losses[losses.length - 1]!).toBeLessThan(0.5 * losses[0]!);
});
