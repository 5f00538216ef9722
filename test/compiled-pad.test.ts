import { jest } from '@jest/globals';
import { generatePoplar } from '@tilegraph/codegen-poplar';
import { GraphBuilder, Module, Tensor, collectVariables, execute, seq, streamIn } from '@tilegraph/ir';
import { CompiledBackend, ModuleInterpreter } from '@tilegraph/runtime';
import { compareOutputs, randomTensor } from '../packages/runtime/src/compiled/testing.js';

/**
 * Zero padding that spreads the input out element by element (the input gradient of a strided
 * convolution: s - 1 zeros after each element) is a tensor of its own, zeroed and with the input
 * copied into it; padding around whole rows stays a view. Either way the values are exactly the
 * reference's, and a convolution reading the spread-out tensor gives the reference's results.
 */

jest.setTimeout(20 * 60 * 1000);

function moduleOf(build: (b: GraphBuilder) => void): Module {
  const b = new GraphBuilder('pads');
  build(b);
  const inputs = b.graph.inputs().map((op) => op.attrs['name'] as string);
  const graphs = new Map([['forward', b.graph]]);
  return { name: 'pads', graphs, program: seq(streamIn(inputs), execute('forward')), replicationFactor: 1, variables: collectVariables(graphs) };
}

const G = [8, 8, 8, 8];

const spread = moduleOf((b) => {
  const g = b.input('g', 'float32', G);
  // [8, 8, 8, 1, 8, 1] padded by one after each 1: every element followed by a zero, as [8, 8, 16, 16]
  const gz = b.op('reshape', [b.op('pad', [b.op('reshape', [g], { shape: [8, 8, 8, 1, 8, 1] })], { pads: [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1] })], { shape: [8, 8, 16, 16] });
  b.output('spread', gz);
  b.output('conv', b.op('convolution', [gz, b.input('w', 'float32', [4, 8, 3, 3])], { pads: [1, 1, 1, 1] }));
  // rows padded on either side: runs of 8, a view
  b.output('rows', b.op('pad', [g], { pads: [0, 0, 1, 2, 0, 0, 1, 2] }));
});

test('element-by-element zero padding is written out; padding around rows is a view', () => {
  const host = generatePoplar(spread).files['host.cpp'];
  expect(host.match(/popops::zero\(/g)).toHaveLength(1);
  expect(host).toMatch(/poplar::program::Copy\(t\d+, t\d+\.slice\(0, 1, 3\)\.slice\(0, 1, 5\)\)\);/);
  expect(host).toMatch(/poplar::concat\(\{broadcastTo\(/);
});

test('the written-out padding and a convolution reading it match the reference', () => {
  const feeds = { g: [randomTensor('float32', G, 5)], w: [randomTensor('float32', [4, 8, 3, 3], 6)] };
  const backend = CompiledBackend.compile(spread, { showProgress: false });
  let got: Record<string, Tensor[]>;
  try {
    got = backend.run(feeds);
  } finally {
    backend.dispose();
  }
  const want = new ModuleInterpreter(spread).run(feeds);
  expect(compareOutputs(got, want, (name) => (name === 'conv' ? { rtol: 1e-5, atol: 1e-5 } : { rtol: 0, atol: 0 }))).toEqual([]);
});
