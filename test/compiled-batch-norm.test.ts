import { jest } from '@jest/globals';
import { generatePoplar } from '@tilegraph/codegen-poplar';
import { DType, GraphBuilder, Module, Tensor, collectVariables, execute, seq, streamIn } from '@tilegraph/ir';
import { CompiledBackend, ModuleInterpreter } from '@tilegraph/runtime';
import { compareOutputs, randomTensor } from '../packages/runtime/src/compiled/testing.js';

/**
 * Training-mode batch norm's statistics (batch_norm_stats) and gradients (batch_norm_grad) are
 * PopLibs calls (popnn::bn) in the generated program; on the emulated IPU they give the
 * reference interpreter's results for activations of rank 2 (one value per channel a sample)
 * and 4, in float and half, with the statistics computed again or given (as the decompose pass
 * passes the forward's on), and with dx unread (the decompose pass computes it from the sums).
 */

jest.setTimeout(20 * 60 * 1000);

function moduleOf(dtype: DType, shape: number[]): Module {
  const b = new GraphBuilder('bn');
  const x = b.input('x', dtype, shape);
  const g = b.input('g', dtype, shape);
  const scale = b.input('scale', dtype, [shape[1]!]);
  const [mean, invStd] = b.ops('batch_norm_stats', [x], { epsilon: 1e-3 });
  const [dx, dscale, dbias] = b.ops('batch_norm_grad', [g, x, scale], { epsilon: 1e-3 });
  b.output('mean', mean!);
  b.output('inv_std', invStd!);
  b.output('dx', dx!);
  b.output('dscale', dscale!);
  b.output('dbias', dbias!);
  // the form the decompose pass makes, with the forward's statistics given
  const [dxGiven, dscaleGiven, dbiasGiven] = b.ops('batch_norm_grad', [g, x, scale, mean!, invStd!], { epsilon: 1e-3 });
  b.output('dx_given', dxGiven!);
  b.output('dscale_given', dscaleGiven!);
  b.output('dbias_given', dbiasGiven!);
  // dx unread (the decompose pass computes it from the sums): only the sums are asked for
  const [, dscaleOnly, dbiasOnly] = b.ops('batch_norm_grad', [g, x, scale, mean!, invStd!], { epsilon: 1e-3 });
  b.output('dscale_only', dscaleOnly!);
  b.output('dbias_only', dbiasOnly!);
  const graphs = new Map([['forward', b.graph]]);
  return { name: 'bn', graphs, program: seq(streamIn(['x', 'g', 'scale']), execute('forward')), replicationFactor: 1, variables: collectVariables(graphs) };
}

const cases: [DType, number[], number][] = [
  ['float32', [8, 6], 1e-5],
  ['float32', [4, 3, 5, 7], 1e-5],
  ['float16', [4, 3, 6, 6], 1e-2],
];

test('the generated program calls popnn::bn for the statistics and the gradients', () => {
  const host = generatePoplar(moduleOf('float32', [4, 3, 5, 7])).files['host.cpp'];
  expect(host).toMatch(/popnn::bn::batchNormStatistics\(/);
  expect(host).toMatch(/popnn::bn::batchNormGradients\(/);
  expect(host).toMatch(/popnn::bn::batchNormParamGradients\(/);
  // the form with the statistics given computes them once: one statistics call for the two gradients
  expect(host.match(/popnn::bn::batchNormStatistics\(/g)).toHaveLength(2);
  expect(host.match(/popnn::bn::batchNormGradients\(/g)).toHaveLength(2);
  // a gradient whose dx nothing reads makes only the parameters' gradients
  expect(host.match(/popnn::bn::batchNormParamGradients\(/g)).toHaveLength(3);
});

test.each(cases)('%s %j: the emulated IPU gives the reference results', (dtype, shape, tol) => {
  const m = moduleOf(dtype, shape);
  const feeds = { x: [randomTensor(dtype, shape, 1)], g: [randomTensor(dtype, shape, 2)], scale: [randomTensor(dtype, [shape[1]!], 3)] };
  const backend = CompiledBackend.compile(m, { showProgress: false });
  let got: Record<string, Tensor[]>;
  try {
    got = backend.run(feeds);
  } finally {
    backend.dispose();
  }
  const want = new ModuleInterpreter(m).run(feeds);
  expect(compareOutputs(got, want, () => ({ rtol: tol, atol: tol }))).toEqual([]);
});
