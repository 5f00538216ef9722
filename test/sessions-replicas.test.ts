import { CommGroupType, MeanReductionStrategy, Options, OutputMode, VariableRetrievalMode } from '@tilegraph/frontend';
import { DiagnosticError, Graph, GraphBuilder, Tensor } from '@tilegraph/ir';
import { makeOptimizer } from '@tilegraph/passes';
import { WeightGrouping } from '@tilegraph/runtime';
import { inferenceModel, trainingModel } from './support/reference.js';
import { Batch, expectClose, feed, linearRegression, linregGrad, regressionBatch, sgdStep, thrown } from './support/sessions.js';

/**
 * Replica-grouped weights (PopTorch replicaGrouping / PopART VariableSettings) and input replica
 * grouping, with 4 replicas. PopART's groups (POPLAR-NOTES): Consecutive(2) = {0,1}, {2,3};
 * Orthogonal(2) = {0,2}, {1,3}; NoGrouping = each replica alone.
 */

const R = 4;
const lr = 0.1;
const w0 = [0.5, -0.25];

/** Replica r trains on micro-batch r (one sample each): different data on every replica. */
const perReplica: Batch[] = Array.from({ length: R }, (_, r) => regressionBatch(r, 1));

function model(grouping: WeightGrouping, strategy?: MeanReductionStrategy) {
  const o = new Options().replicationFactor(R);
  if (strategy) o.Training.setMeanAccumulationAndReplicationReductionStrategy(strategy);
  return trainingModel(linearRegression(1, w0), o, makeOptimizer('SGD', { lr }), { replicaGrouping: { w: grouping } });
}

/** One SGD step per group on the mean gradient of the group's replicas (float64). */
function expectedPerGroup(groups: number[][]): number[][] {
  return groups.map((members) => sgdStep(w0, members.map((r) => linregGrad(w0, perReplica[r]!.xs, perReplica[r]!.ys)), lr));
}

describe('gradients are reduced only within each replica group', () => {
  test.each([
    ['Consecutive(2)', { type: CommGroupType.Consecutive, shards: 2 }, [[0, 1], [2, 3]]],
    ['Orthogonal(2)', { type: CommGroupType.Orthogonal, shards: 2 }, [[0, 2], [1, 3]]],
    ['NoGrouping', { type: CommGroupType.NoGrouping, shards: 1 }, [[0], [1], [2], [3]]],
  ] as const)('%s: one value per group (OnePerGroup), each trained on its own replicas', (_, grouping, groups) => {
    const m = model(grouping);
    m.run(feed(perReplica));
    const w = m.stateDict()['w']!;
    expect(w.shape).toEqual([groups.length, 2]);
    expectClose(w.data, expectedPerGroup(groups.map((g) => [...g])).flat(), 1e-6, 1e-5);
  });

  test.each([MeanReductionStrategy.Running, MeanReductionStrategy.Post, MeanReductionStrategy.PostAndLoss])(
    'Consecutive(2) with %s: the same group means',
    (strategy) => {
      const m = model({ type: CommGroupType.Consecutive, shards: 2 }, strategy);
      m.run(feed(perReplica));
      expectClose(m.stateDict()['w']!.data, expectedPerGroup([[0, 1], [2, 3]]).flat(), 1e-6, 1e-5);
    },
  );

  test('ungrouped weights (All) take the mean over all four replicas and read back as one value', () => {
    const m = model({ type: CommGroupType.All, shards: 0 });
    m.run(feed(perReplica));
    const w = m.stateDict()['w']!;
    expect(w.shape).toEqual([2]);
    expectClose(w.data, expectedPerGroup([[0, 1, 2, 3]])[0]!, 1e-6, 1e-5);
  });

  test('AllReplicas returns one value per replica: replicas of a group agree', () => {
    const m = model({ type: CommGroupType.Orthogonal, shards: 2, retrieval: VariableRetrievalMode.AllReplicas });
    m.run(feed(perReplica));
    const w = m.stateDict()['w']!;
    expect(w.shape).toEqual([4, 2]);
    const [g0, g1] = expectedPerGroup([[0, 2], [1, 3]]);
    expectClose(w.data, [...g0!, ...g1!, ...g0!, ...g1!], 1e-6, 1e-5);
  });

  test('the accumulator and optimizer state follow the weight grouping', () => {
    const m = trainingModel(linearRegression(1, w0), new Options().replicationFactor(R), makeOptimizer('SGD', { lr, momentum: 0.5 }), {
      replicaGrouping: { w: { type: CommGroupType.Consecutive, shards: 2 } },
    });
    m.run(feed(perReplica));
    // torch's first momentum step stores the gradient itself: one buffer per group, the group's mean gradient
    const mom = m.readTensor('w.momentum');
    expect(mom.shape).toEqual([2, 2]);
    const grads = perReplica.map((b) => linregGrad(w0, b.xs, b.ys));
    const mean = (a: number[], b: number[]) => a.map((v, j) => (v + b[j]!) / 2);
    expectClose(mom.data, [...mean(grads[0]!, grads[1]!), ...mean(grads[2]!, grads[3]!)], 1e-6, 1e-5);
  });
});

describe('loading grouped weights', () => {
  test('a leading group dimension writes each group; training continues from those values', () => {
    const m = model({ type: CommGroupType.Consecutive, shards: 2 });
    const start = [
      [1, 2],
      [-1, 0.5],
    ];
    m.loadStateDict({ w: Tensor.from('float32', [2, 2], start.flat()) });
    expectClose(m.stateDict()['w']!.data, start.flat());
    m.run(feed(perReplica));
    const want = [
      [0, 1],
      [2, 3],
    ].map((members, g) => sgdStep(start[g]!, members.map((r) => linregGrad(start[g]!, perReplica[r]!.xs, perReplica[r]!.ys)), lr));
    expectClose(m.stateDict()['w']!.data, want.flat(), 1e-6, 1e-5);
  });

  test('one value without the group dimension is written to every group', () => {
    const m = model({ type: CommGroupType.NoGrouping, shards: 1 });
    m.loadStateDict({ w: Tensor.from('float32', [2], [3, 4]) });
    expectClose(m.stateDict()['w']!.data, [3, 4, 3, 4, 3, 4, 3, 4]);
  });

  test('a wrong number of groups is an error naming the grouping', () => {
    const m = model({ type: CommGroupType.Consecutive, shards: 2 });
    const e = thrown(() => m.loadStateDict({ w: Tensor.zeros('float32', [4, 2]) }));
    expect(e).toBeInstanceOf(DiagnosticError);
    expect(e.message).toContain("'w' is float32[2] in 2 replica groups; cannot load float32[4,2]");
  });

  test('a group size that does not divide the replicas is an error', () => {
    const e = thrown(() => model({ type: CommGroupType.Consecutive, shards: 3 }).run(feed(perReplica)));
    expect(e).toBeInstanceOf(DiagnosticError);
    expect(e.message).toContain('group size 3 does not divide the replication factor 4');
  });

  test('grouping a weight the model does not have is an error', () => {
    const o = new Options().replicationFactor(R);
    const m = trainingModel(linearRegression(1, w0), o, makeOptimizer('SGD'), { replicaGrouping: { v: { type: CommGroupType.NoGrouping, shards: 1 } } });
    expect(thrown(() => m.run(feed(perReplica))).message).toContain("replicaGrouping: the model has no parameter named 'v'");
  });
});

describe('inputReplicaGrouping: replicas of an input group read the same micro-batch', () => {
  /** out = x + 0 per sample (x [1]). */
  function identity(): Graph {
    const b = new GraphBuilder('id');
    const x = b.input('x', 'float32', [1]);
    b.output('out', b.op('add', [x, b.scalar('float32', 0)]));
    return b.graph;
  }
  const x2 = Tensor.from('float32', [2], [10, 20]);

  test('Consecutive(2): replicas 0,1 get micro-batch 0 and replicas 2,3 micro-batch 1; a run takes 2 samples', () => {
    const o = new Options().replicationFactor(4).inputReplicaGrouping(2, CommGroupType.Consecutive).outputMode(OutputMode.All);
    const out = inferenceModel(identity(), o).run({ x: x2 })['out']!;
    // outputs are per replica: [r0, r1, r2, r3]
    expectClose(out.data, [10, 10, 20, 20]);
  });

  test('Orthogonal(2): replicas 0,2 get micro-batch 0 and replicas 1,3 micro-batch 1', () => {
    const o = new Options().replicationFactor(4).inputReplicaGrouping(2, CommGroupType.Orthogonal).outputMode(OutputMode.All);
    const out = inferenceModel(identity(), o).run({ x: x2 })['out']!;
    expectClose(out.data, [10, 20, 10, 20]);
  });

  test('4 samples for 2 input groups is an error', () => {
    const o = new Options().replicationFactor(4).inputReplicaGrouping(2);
    const e = thrown(() => inferenceModel(identity(), o).run({ x: Tensor.zeros('float32', [4]) }));
    expect(e).toBeInstanceOf(DiagnosticError);
    expect(e.message).toContain("input 'x': expected float32[2] (2 micro-batches of float32[1]) but got float32[4]");
  });

  test('training: each micro-batch counts once per replica that read it', () => {
    const o = new Options().replicationFactor(4).inputReplicaGrouping(2, CommGroupType.Consecutive);
    const m = trainingModel(linearRegression(1, w0), o, makeOptimizer('SGD', { lr }));
    const b = [regressionBatch(0, 1), regressionBatch(1, 1)];
    m.run(feed(b));
    // 4 replica gradients g0, g0, g1, g1: their mean is the mean of g0 and g1
    const g = b.map((x) => linregGrad(w0, x.xs, x.ys));
    expectClose(m.stateDict()['w']!.data, sgdStep(w0, [g[0]!, g[0]!, g[1]!, g[1]!], lr), 1e-6, 1e-5);
    expectClose(m.stateDict()['w']!.data, sgdStep(w0, g, lr), 1e-6, 1e-5);
  });

  test('a group size that does not divide the replicas is an error', () => {
    const o = new Options().replicationFactor(4).inputReplicaGrouping(3);
    const e = thrown(() => inferenceModel(identity(), o).run({ x: x2 }));
    expect(e).toBeInstanceOf(DiagnosticError);
    expect(e.message).toContain('is not divisible by the input replica group size (3)');
  });
});
