import { MeanReductionStrategy, Options, ReductionType } from '@tilegraph/frontend';
import { GraphBuilder, Tensor } from '@tilegraph/ir';
import { makeOptimizer } from '@tilegraph/passes';
import { trainingModel } from './support/reference.js';
import { expectClose, feed, linearRegression, linregGrad, regressionBatch, sgdStep } from './support/sessions.js';

/**
 * Gradient accumulation (A) × replication (R) with mean reduction: Running, Post and PostAndLoss
 * all compute the mean of the A·R micro-batch gradients, and differ only in where they divide —
 * which matters when the accumulator is float16.
 */

const A = 4;
const R = 2;
const lr = 0.05;
const w0 = [0.5, -0.25, 0.125];

function options(strategy?: MeanReductionStrategy, reduction = ReductionType.Mean): Options {
  const o = new Options().replicationFactor(R);
  o.Training.gradientAccumulation(A).accumulationAndReplicationReductionType(reduction);
  if (strategy) o.Training.setMeanAccumulationAndReplicationReductionStrategy(strategy);
  return o;
}

/** The 8 micro-batches (2 samples each) of step s. */
const stepBatches = (s: number) => Array.from({ length: A * R }, (_, k) => regressionBatch(2 * (s * A * R + k), 2, 3));

/** Three steps computed in float64: w ← w − lr · (mean or sum of the 8 micro-batch gradients). */
function expected(reduction: 'mean' | 'sum'): number[] {
  let w = [...w0];
  for (let s = 0; s < 3; s++) {
    const grads = stepBatches(s).map((b) => linregGrad(w, b.xs, b.ys));
    w = sgdStep(w, grads, reduction === 'mean' ? lr : lr * grads.length);
  }
  return w;
}

function train(o: Options): Float32Array {
  const m = trainingModel(linearRegression(2, w0), o, makeOptimizer('SGD', { lr }));
  for (let s = 0; s < 3; s++) m.run(feed(stepBatches(s)));
  return m.stateDict()['w']!.data as Float32Array;
}

describe('float32: the three mean strategies agree up to rounding (A = 4, R = 2)', () => {
  const want = expected('mean');
  test.each([MeanReductionStrategy.Running, MeanReductionStrategy.Post, MeanReductionStrategy.PostAndLoss])('%s', (strategy) => {
    expectClose(train(options(strategy)), want, 1e-6, 1e-5);
  });

  test('Running and Post differ by float32 rounding at most', () => {
    const running = train(options(MeanReductionStrategy.Running));
    const post = train(options(MeanReductionStrategy.Post));
    expectClose(running, Array.from(post), 1e-6, 1e-6);
  });

  test('Sum reduction adds the 8 gradients instead', () => {
    expectClose(train(options(undefined, ReductionType.Sum)), expected('sum'), 1e-6, 1e-5);
  });
});

describe('float16 accumulator: Post overflows where Running does not', () => {
  /** loss = w · x summed over a micro-batch of one sample, so dloss/dw = x. */
  function model() {
    const b = new GraphBuilder('scaled');
    const x = b.input('x', 'float32', [1]);
    const w = b.parameter('w', 'float32', [], Tensor.scalar('float32', 1));
    b.output('loss', b.op('identity_loss', [b.op('mul', [x, w])], { reduction: 'sum' }));
    return b.graph;
  }
  // each micro-batch gradient is 20000 (representable in float16); A = 4 micro-batches on 1 replica.
  // Post sums first: 20000 · 4 = 80000 > 65504 (float16 max) → inf. Running keeps the mean:
  // acc·f/(f+1) + g/(f+1) stays at 20000 (float16 rounding of 2/3 and 1/3 lands back on 20000).
  // With lr = 1e-4 the mean step is 1e-4 · 20000 = 2, so w goes from 1 to −1.
  const x = Tensor.from('float32', [4], [20000, 20000, 20000, 20000]);
  const opts = (strategy?: MeanReductionStrategy) => {
    const o = new Options();
    o.Training.gradientAccumulation(4);
    if (strategy) o.Training.setMeanAccumulationAndReplicationReductionStrategy(strategy);
    return o;
  };
  const run = (strategy?: MeanReductionStrategy) => {
    const m = trainingModel(model(), opts(strategy), makeOptimizer('SGD', { lr: 1e-4, accum_type: 'float16' }));
    m.run({ x });
    return { w: m.stateDict()['w']!.data[0]!, accum: m.readTensor('w.accum') };
  };

  test('Post: the float16 sum overflows and the weight is no longer finite', () => {
    expect(Number.isFinite(run(MeanReductionStrategy.Post).w)).toBe(false);
  });

  test('PostAndLoss with one replica divides only after accumulating: overflows too', () => {
    expect(Number.isFinite(run(MeanReductionStrategy.PostAndLoss).w)).toBe(false);
  });

  test('Running: the float16 running mean stays at 20000 and the step is exact', () => {
    const r = run(MeanReductionStrategy.Running);
    expectClose([r.w], [-1], 1e-5, 0);
    // the accumulator is float16 and was reset after the update
    expect(r.accum.dtype).toBe('float16');
    expect(r.accum.data[0]).toBe(0);
  });

  test("PopTorch's default with a float16 accumulator is Running", () => {
    expectClose([run().w], [-1], 1e-5, 0);
  });

  test('the float32 accumulator does not overflow with Post', () => {
    const m = trainingModel(model(), opts(MeanReductionStrategy.Post), makeOptimizer('SGD', { lr: 1e-4 }));
    m.run({ x });
    expectClose(m.stateDict()['w']!.data, [-1], 1e-5, 0);
  });
});
