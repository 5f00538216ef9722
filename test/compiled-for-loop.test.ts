import { jest } from '@jest/globals';
import { compileModelSource } from '@tilegraph/frontend';
import { generatePoplar, hostUnits } from '@tilegraph/codegen-poplar';
import { Graph } from '@tilegraph/ir';
import { StepSettings, buildInferenceModule, buildTrainingModule, makeOptimizer } from '@tilegraph/passes';
import { CompiledBackend, ModuleInterpreter, runGraph } from '@tilegraph/runtime';
import { compareOutputs, compareTensors, randomTensor } from '../packages/runtime/src/compiled/testing.js';

/**
 * for_loop on the emulated IPU: one poplar::program::Repeat around the body's ops, lowered once,
 * giving the reference interpreter's results (which unrolls nothing: its kernel runs the body).
 */

jest.setTimeout(10 * 60 * 1000);
const SETTINGS: StepSettings = { deviceIterations: 1, replicationFactor: 1, gradientAccumulation: 1, reduction: 'mean', recomputation: 'none' };

const model = (count: number) =>
  compileModelSource(
    [
      'fn layer(h, c) {',
      '  param w: f32[4, 4] = normal(0, 0.5, seed = 3)',
      '  return [tanh(h @ w) + c * 0.5, c]',
      '}',
      'model m {',
      '  input x: f32[2, 4]',
      '  input c: f32[2, 4]',
      `  let r = for_loop(${count}, layer, [x, c])`,
      '  output y = r[0]',
      '}',
    ].join('\n'),
    'loop.tg',
  );

const hostCode = (g: Graph) => generatePoplar(buildInferenceModule(g, SETTINGS), { allowOutOfMemory: true }).files['host.cpp']!;
const count = (s: string, re: RegExp) => (s.match(re) ?? []).length;

describe('for_loop on the device', () => {
  it('emits one Repeat around the body lowered once: the host code does not grow with the count', () => {
    const five = hostCode(model(5));
    const fifty = hostCode(model(50));
    expect(count(five, /poplar::program::Repeat\(5, /g)).toBe(1);
    expect(count(five, /poplin::matMul\(/g)).toBe(1);
    expect(fifty.length).toBe(five.length + 2); // "50" for "5" in the Repeat and its comment
  });

  it('runs matmul + tanh 5 times in the second stage of a 2-IPU pipeline, giving the reference results', () => {
    // the second carried value is a transpose of itself: the copies back must not read what they overwrite
    const g = compileModelSource(
      [
        'fn layer(h, c) {',
        '  param w: f32[4, 4] = normal(0, 0.5, seed = 3)',
        '  return [tanh(h @ w) + c * 0.5, transpose(c, perm=[1, 0])]',
        '}',
        'model m {',
        '  input x: f32[4, 4]',
        '  input c: f32[4, 4]',
        '  block "a" ipu 0 { let h = x * 2 }',
        '  block "b" ipu 1 { let r = for_loop(5, layer, [h, c]) }',
        '  output y = r[0]',
        '  output z = r[1]',
        '}',
      ].join('\n'),
      'pipelined.tg',
    );
    const m = buildInferenceModule(g, { ...SETTINGS, deviceIterations: 2 });
    expect([...m.graphs.keys()]).toEqual(['stage0', 'stage1']);
    expect(m.graphs.get('stage1')!.ops.filter((o) => o.kind === 'for_loop').length).toBe(1);
    const feeds = { x: [0, 1].map((k) => randomTensor('float32', [4, 4], 1 + k)), c: [0, 1].map((k) => randomTensor('float32', [4, 4], 5 + k)) };
    const want = new ModuleInterpreter(m).run(feeds);
    // the reference interpreter against the loop built by hand: (c transposed 5 times) = c transposed
    expect(Array.from(want['z']![0]!.data)).toEqual(Array.from(runGraph(compileModelSource('model t {\n  input c: f32[4, 4]\n  output z = transpose(c, perm=[1, 0])\n}\n', 't.tg'), { c: feeds.c[0]! }).outputs['z']!.data));
    const exe = CompiledBackend.compile(m, { seed: 0, showProgress: false });
    try {
      expect(compareOutputs(exe.run(feeds), want)).toEqual([]);
    } finally {
      exe.dispose();
    }
  });

  it('trains through the loop (a stashing and a reverse loop) giving the reference losses and weights', () => {
    const g = compileModelSource(
      [
        'fn step(h) {',
        '  param w: f32[3, 3] = normal(0, 0.5, seed = 7)',
        '  return tanh(h @ w)',
        '}',
        'model m {',
        '  input x: f32[2, 3]',
        '  let y = for_loop(4, step, x)',
        '  loss = reduce_sum(y * y)',
        '}',
      ].join('\n'),
      'train.tg',
    );
    const m = buildTrainingModule(g, SETTINGS, makeOptimizer('SGD', { lr: 0.1 })).module;
    const host = generatePoplar(m, { allowOutOfMemory: true }).files['host.cpp']!;
    expect(count(host, /poplar::program::Repeat\(4, /g)).toBe(3);
    const ref = new ModuleInterpreter(m);
    const exe = CompiledBackend.compile(m, { seed: 0, showProgress: false });
    try {
      for (let i = 0; i < 2; i++) {
        const feeds = { x: [randomTensor('float32', [2, 3], 10 + i)] };
        expect(compareOutputs(exe.run(feeds), ref.run(feeds))).toEqual([]);
      }
      expect(compareTensors('w', exe.read('w')[0]!, ref.read('w')[0]!)).toBeUndefined();
    } finally {
      exe.dispose();
    }
  });

  it('outlines repeated layers holding a loop: the loop is lowered once, in the function every layer calls', () => {
    const g = compileModelSource(
      [
        'fn step(h) {',
        '  param w: f32[8, 8] = normal(0, 0.3, seed = 1)',
        '  return tanh(h @ w) + h',
        '}',
        'fn layer(h) {',
        '  let a = for_loop(3, step, h)',
        '  param v: f32[8, 8] = normal(0, 0.3, seed = 2)',
        '  return relu(a @ v) + a',
        '}',
        'model m {',
        '  input x: f32[4, 8]',
        '  output y = layer(layer(layer(x) as l0) as l1) as l2',
        '}',
      ].join('\n'),
      'outlined.tg',
    );
    const m = buildInferenceModule(g, SETTINGS);
    const files = generatePoplar(m, { allowOutOfMemory: true }).files;
    // the outlined layer (and the loop in it) is in host_layers.cpp, its calls in the graph's builder
    const host = hostUnits(files).map((u) => files[u]).join('');
    expect(count(host, /poplar::program::Repeat\(3, /g)).toBe(1);
    expect(count(host, /= layer_0\(d, /g)).toBe(3);
    const feeds = { x: [randomTensor('float32', [4, 8], 21)] };
    const exe = CompiledBackend.compile(m, { seed: 0, showProgress: false });
    try {
      expect(compareOutputs(exe.run(feeds), new ModuleInterpreter(m).run(feeds))).toEqual([]);
    } finally {
      exe.dispose();
    }
  });
});
