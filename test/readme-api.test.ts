import { ModelBuilder, Options } from '@tilegraph/frontend';
import { Rng, Tensor } from '@tilegraph/ir';
import { makeOptimizer } from '@tilegraph/passes';
import { trainingModel } from './support/reference.js';

/** The TypeScript example of the README, as written there (run on the reference interpreter; the compiled path has tests of its own). */
describe('README TypeScript example', () => {
  it('builds, trains and reads the weights back', () => {
    const m = new ModelBuilder('mlp');
    const x = m.input('x', 'float32', [4, 16]);
    const y = m.input('y', 'int32', [4]);
    const logits = m.output('logits', m.linear(m.relu(m.linear(x, 16, 32, { name: 'fc1' })), 32, 10, { name: 'fc2' }));
    m.loss(m.crossEntropy(logits, y)); // marks the loss and outputs it as 'loss'

    const opts = new Options().deviceIterations(2);
    opts.Training.gradientAccumulation(4);
    const model = trainingModel(m.graph, opts, makeOptimizer('Adam', { lr: 1e-3 }));
    const rng = new Rng(3);
    const n = 4 * 2 * 4;
    const xs = Tensor.from('float32', [n, 16], Array.from({ length: n * 16 }, () => rng.normal()));
    const ys = Tensor.from('int32', [n], Array.from({ length: n }, (_, i) => i % 10));
    const { loss } = model.run({ x: xs, y: ys });
    // Final output mode (the training default): the last micro-batch's loss, a scalar as declared
    expect(loss!.shape).toEqual([]);
    const weights = model.stateDict();
    expect(Object.keys(weights).sort()).toEqual(['fc1.bias', 'fc1.weight', 'fc2.bias', 'fc2.weight']);
    expect(weights['fc1.weight']!.shape).toEqual([32, 16]);
  });
});
