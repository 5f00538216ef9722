import { ConnectionType, ModelBuilder, Options, SyncPattern } from '@tilegraph/frontend';
import { makeOptimizer } from '@tilegraph/passes';
import { referenceBackend } from './backend.js';
import { trainingModel } from './models.js';

/** Options accepted without effect where the model runs are said once, as a warning of the compile. */

function model() {
  const m = new ModelBuilder('m');
  const x = m.input('x', 'float32', [2, 3]);
  const y = m.input('y', 'int32', [2]);
  m.loss(m.crossEntropy(m.output('logits', m.linear(x, 3, 4, { name: 'fc' })), y));
  return m.graph;
}

const hardwareWarnings = (o: Options) => {
  const t = trainingModel(model(), o, makeOptimizer('SGD', { lr: 0.1 }), { backend: referenceBackend });
  t.compile();
  return t.warnings.filter((w) => w.message.startsWith('options that need IPU hardware'));
};

test('hardware-only options are listed once on a target without IPUs; none, no warning', () => {
  expect(hardwareWarnings(new Options())).toEqual([]);
  const w = hardwareWarnings(new Options().syncPattern(SyncPattern.SinglePipeline).connectionType(ConnectionType.OnDemand));
  expect(w).toHaveLength(1);
  expect(w[0]!.message).toBe('options that need IPU hardware have no effect here: connectionType("OnDemand"), syncPattern("SinglePipeline")');
  // options the emulation carries out are not listed
  expect(hardwareWarnings(new Options().useIpuModel(true).autoRoundNumIPUs(true))).toEqual([]);
});
