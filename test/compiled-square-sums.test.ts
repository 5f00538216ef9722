import { jest } from '@jest/globals';
import { generatePoplar } from '@tilegraph/codegen-poplar';
import { GraphBuilder, Module, Tensor, collectVariables, execute, seq, streamIn } from '@tilegraph/ir';
import { CompiledBackend, ModuleInterpreter } from '@tilegraph/runtime';
import { compareOutputs, randomTensor } from '../packages/runtime/src/compiled/testing.js';

/**
 * A float32 sum or mean of x * x that nothing else reads (a batch norm's variance) is reduced as
 * popops SQUARE_ADD of x, and the squares are not written out. The variance must come out bit for
 * bit as when the squares are a tensor of their own (here: also an output), and match the
 * reference interpreter.
 */

jest.setTimeout(20 * 60 * 1000);

const SHAPE = [4, 8, 6, 6];

/** Batch-norm statistics over [0, 2, 3]; with `squaresOut` the squares are an output too. */
function statistics(squaresOut: boolean): Module {
  const b = new GraphBuilder('stats');
  const x = b.input('x', 'float32', SHAPE);
  const mean = b.op('reduce_mean', [x], { axes: [0, 2, 3], keepdims: true });
  const d = b.op('sub', [x, mean]);
  const sq = b.op('mul', [d, d]);
  b.output('var', b.op('reduce_mean', [sq], { axes: [0, 2, 3], keepdims: true }));
  b.output('sumsq', b.op('reduce_sum', [b.op('mul', [x, x])], { axes: [1] }));
  b.output('d', d);
  if (squaresOut) b.output('sq', sq);
  const graphs = new Map([['forward', b.graph]]);
  return { name: 'stats', graphs, program: seq(streamIn(['x']), execute('forward')), replicationFactor: 1, variables: collectVariables(graphs) };
}

function run(module: Module, feeds: Record<string, Tensor[]>): Record<string, Tensor[]> {
  const backend = CompiledBackend.compile(module, { showProgress: false });
  try {
    return backend.run(feeds);
  } finally {
    backend.dispose();
  }
}

test('sums of squares nothing else reads are SQUARE_ADD reductions, with the same bits', () => {
  const absorbed = statistics(false);
  const written = statistics(true);
  const hostOf = (m: Module) => generatePoplar(m).files['host.cpp'];
  expect(hostOf(absorbed).match(/Operation::SQUARE_ADD/g)).toHaveLength(2);
  // read elsewhere, the squares are a tensor: that reduction adds them
  expect(hostOf(written).match(/Operation::SQUARE_ADD/g)).toHaveLength(1);

  const feeds = { x: [randomTensor('float32', SHAPE, 3, -3, 3)] };
  const got = run(absorbed, feeds);
  const base = run(written, feeds);
  for (const name of ['var', 'sumsq', 'd']) {
    expect(Buffer.from(new Float32Array(got[name]![0]!.data).buffer)).toEqual(Buffer.from(new Float32Array(base[name]![0]!.data).buffer));
  }
  const want = new ModuleInterpreter(absorbed).run(feeds);
  expect(compareOutputs(got, want, () => ({ rtol: 1e-5, atol: 1e-6 }))).toEqual([]);
});
