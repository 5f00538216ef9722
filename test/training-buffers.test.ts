import { Options } from '@tilegraph/frontend';
import { GraphBuilder, Tensor } from '@tilegraph/ir';
import { makeOptimizer } from '@tilegraph/passes';
import { trainingModel } from './support/reference.js';

describe('batch-norm running statistics during training', () => {
  it('are written back after every micro-batch and receive no gradient', () => {
    const b = new GraphBuilder('bn');
    const x = b.input('x', 'float32', [4, 2]);
    const p = (name: string, v: number[]) => b.parameter(name, 'float32', [2], Tensor.from('float32', [2], v));
    const [y] = b.ops('batch_norm', [x, p('scale', [1, 1]), p('bias', [0, 0]), p('running_mean', [0, 0]), p('running_var', [1, 1])], { training: true, momentum: 0.9 });
    const w = p('w', [1, 2]);
    b.output('loss', b.op('identity_loss', [b.op('reduce_sum', [b.op('mul', [y!, w])])], { reduction: 'sum' }));
    const opts = new Options();
    opts.Training.gradientAccumulation(2);
    const m = trainingModel(b.graph, opts, makeOptimizer('SGD', { lr: 0.1 }));
    // micro-batch 1: columns 1,2,3,4 and 0,5,15,20: means 2.5 and 10, unbiased variances 5/3 and 250/3
    // micro-batch 2: columns -1,1,-1,1 and -1,3,-1,3: means 0 and 1, unbiased variances 4/3 and 16/3
    m.run({ x: Tensor.from('float32', [8, 2], [1, 0, 2, 5, 3, 15, 4, 20, -1, -1, 1, 3, -1, -1, 1, 3]) });
    const rm = m.readTensor('running_mean').toArray();
    const rv = m.readTensor('running_var').toArray();
    // after batch 1: rm = 0.1·[2.5, 10] = [0.25, 1]; rv = 0.9 + 0.1·[5/3, 250/3]
    // after batch 2: rm = 0.9·[0.25, 1] + 0.1·[0, 1] = [0.225, 1]
    //                rv = 0.9·rv1 + 0.1·[4/3, 16/3]
    const rv1 = [0.9 + 0.1 * (5 / 3), 0.9 + 0.1 * (250 / 3)];
    expect(rm[0]).toBeCloseTo(0.225, 6);
    expect(rm[1]).toBeCloseTo(1.0, 6);
    expect(rv[0]).toBeCloseTo(0.9 * rv1[0]! + 0.1 * (4 / 3), 5);
    expect(rv[1]).toBeCloseTo(0.9 * rv1[1]! + 0.1 * (16 / 3), 4);
    // the statistics are state, not trained weights: no accumulator exists for them
    expect(m.getTensorNames()).not.toContain('running_mean.accum');
    expect(m.getTensorNames()).toContain('w.accum');
  });
});

describe('the model language batch_norm2d', () => {
  it('keeps running statistics as state that training updates', async () => {
    const path = await import('node:path');
    const { fileURLToPath } = await import('node:url');
    const { loadModelFile } = await import('@tilegraph/frontend');
    const file = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../examples/cnn.tg');
    const g = loadModelFile(file, { args: { batch: 2 } });
    const m = trainingModel(g, new Options(), makeOptimizer('SGD', { lr: 0.1 }));
    const x = Tensor.from('float32', [2, 1, 8, 8], Array.from({ length: 128 }, (_, i) => Math.sin(i) + 1));
    m.run({ x, y: Tensor.from('int32', [2], [1, 3]) });
    const rm = m.readTensor('bn.running_mean').toArray();
    // 0.9·0 + 0.1·(batch mean of each channel): non-zero after one step
    expect(rm.every((v) => v !== 0)).toBe(true);
    expect(m.getTensorNames()).not.toContain('bn.running_mean.accum');
  });
});
