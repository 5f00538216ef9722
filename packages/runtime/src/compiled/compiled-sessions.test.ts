import { jest } from '@jest/globals';
import { Graph, GraphBuilder, Module, Tensor } from '@tilegraph/ir';
import { Options } from '@tilegraph/frontend';
import { buildInferenceModule, buildTrainingModule, makeOptimizer } from '@tilegraph/passes';
import { trainingModel } from '../session/models.js';
import { ModuleInterpreter } from '../reference/module.js';
import { CompiledBackend, compiledBackendFor } from './backend.js';
import { compareOutputs, compareTensors, randomTensor } from './testing.js';

/**
 * Inference and training Modules (as sessions build them) compiled for the emulated IPU and
 * compared with the ModuleInterpreter step by step: outputs and every state variable.
 */

jest.setTimeout(30 * 60 * 1000);

/** A two-layer MLP with a squared-error loss; layers optionally placed on IPUs 0 and 1. */
function mlp(sharded: boolean, dropout = false): Graph {
  const b = new GraphBuilder('mlp');
  const x = b.input('x', 'float32', [4, 6]);
  const y = b.input('label', 'float32', [4, 2]);
  if (sharded) b.annotations = { ipu: 0 };
  const w1 = b.parameter('fc1.weight', 'float32', [6, 8], { kind: 'init', fn: 'xavier_uniform', args: { seed: 1 } });
  const b1 = b.parameter('fc1.bias', 'float32', [8], { kind: 'init', fn: 'uniform', args: { seed: 2, low: -0.1, high: 0.1 } });
  let h = b.op('tanh', [b.op('add', [b.op('matmul', [x, w1]), b1])]);
  if (dropout) h = b.ops('dropout', [h], { ratio: 0.25, seed: 3 })[0]!;
  if (sharded) b.annotations = { ipu: 1 };
  const w2 = b.parameter('fc2.weight', 'float32', [8, 2], { kind: 'init', fn: 'xavier_uniform', args: { seed: 3 } });
  const pred = b.op('matmul', [h, w2]);
  b.output('pred', pred);
  const d = b.op('sub', [pred, y]);
  b.op('identity_loss', [b.op('mul', [d, d])], { reduction: 'mean' });
  return b.graph;
}

function feeds(n: number, seed: number): Record<string, Tensor[]> {
  return {
    x: Array.from({ length: n }, (_, i) => randomTensor('float32', [4, 6], seed + i)),
    label: Array.from({ length: n }, (_, i) => randomTensor('float32', [4, 2], seed + 1000 + i, -1, 1)),
  };
}

/** Runs both for `runs` steps; compares outputs and all state after each. */
function matchReference(m: Module, microBatchesPerRun: number, runs: number, tol = { rtol: 1e-4, atol: 1e-6 }): void {
  const reference = new ModuleInterpreter(m, { seed: 5 });
  const compiled = CompiledBackend.compile(m, { seed: 5, showProgress: false });
  try {
    for (let run = 0; run < runs; run++) {
      const f = feeds(microBatchesPerRun, 10 * run + 1);
      expect(compareOutputs(compiled.run(f), reference.run(f), () => tol)).toEqual([]);
      for (const name of m.variables.keys()) {
        const got = compiled.read(name);
        const want = reference.read(name);
        want.forEach((w, r) => expect(compareTensors(`${name}@${r}`, got[r]!, w, tol)).toBeUndefined());
      }
    }
  } finally {
    compiled.dispose();
  }
}

describe('compiled sessions match the ModuleInterpreter', () => {
  test('inference, 3 device iterations', () => {
    const m = buildInferenceModule(mlp(false), { deviceIterations: 3, replicationFactor: 1, gradientAccumulation: 1, reduction: 'mean' });
    matchReference(m, 3, 2, { rtol: 2e-5, atol: 1e-6 });
  });

  test('training with SGD (momentum) and gradient accumulation 2', () => {
    const t = buildTrainingModule(mlp(false), { deviceIterations: 2, replicationFactor: 1, gradientAccumulation: 2, reduction: 'mean' }, makeOptimizer('SGD', { lr: 0.1, momentum: 0.9 }));
    matchReference(t.module, 4, 3);
  });

  test('replication factor 2: per-replica micro-batches, dropout streams and the all-reduced gradient', () => {
    const t = buildTrainingModule(mlp(false, true), { deviceIterations: 1, replicationFactor: 2, gradientAccumulation: 2, reduction: 'mean' }, makeOptimizer('SGD', { lr: 0.05 }));
    matchReference(t.module, 4, 3);
  });

  test('replica groups: 4 replicas, consecutive and orthogonal groups of 2 (PopART membership)', () => {
    const replicaGrouping = new Map([
      ['fc1.weight', { group: { type: 'consecutive' as const, size: 2 }, retrieval: 'all_replicas' as const }],
      ['fc2.weight', { group: { type: 'orthogonal' as const, size: 2 }, retrieval: 'all_replicas' as const }],
    ]);
    const t = buildTrainingModule(mlp(false), { deviceIterations: 1, replicationFactor: 4, gradientAccumulation: 1, reduction: 'sum', replicaGrouping }, makeOptimizer('SGD', { lr: 0.05 }));
    matchReference(t.module, 4, 2);
  });

  test('a model sharded over 2 IPUs (inference pipelined over its 2 device iterations)', () => {
    const g = mlp(true);
    const inference = buildInferenceModule(g, { deviceIterations: 2, replicationFactor: 1, gradientAccumulation: 1, reduction: 'mean' });
    expect([...inference.graphs.keys()]).toEqual(['stage0', 'stage1']);
    matchReference(inference, 2, 1, { rtol: 2e-5, atol: 1e-6 });
    const sharded = { kind: 'sharded', autoStage: 'same_as_ipu', stages: [], describe: 'ShardedExecution()' } as const;
    const t = buildTrainingModule(g, { deviceIterations: 1, replicationFactor: 1, gradientAccumulation: 2, reduction: 'mean', execution: sharded }, makeOptimizer('SGD', { lr: 0.1 }));
    expect(Math.max(...[...t.module.graphs.values()].flatMap((x) => x.ops.map((o) => o.annotations.ipu ?? 0)))).toBe(1);
    matchReference(t.module, 2, 2);
  });

  test('a training session (trainingModel) on the compiled backend', () => {
    const opts = () => {
      const o = new Options().deviceIterations(2).randomSeed(7);
      o.Training.gradientAccumulation(2);
      return o;
    };
    const sgd = makeOptimizer('SGD', { lr: 0.1, momentum: 0.5 });
    const reference = trainingModel(mlp(false), opts(), sgd);
    const compiled = trainingModel(mlp(false), opts(), sgd, { backend: compiledBackendFor(opts(), { showProgress: false }) });
    for (let run = 0; run < 2; run++) {
      // 2 device iterations × 2 micro-batches of 4 samples
      const f = { x: randomTensor('float32', [16, 6], 50 + run), label: randomTensor('float32', [16, 2], 60 + run, -1, 1) };
      const got = compiled.run(f);
      const want = reference.run(f);
      for (const k of Object.keys(want)) expect(compareTensors(k, got[k]!, want[k]!, { rtol: 1e-4, atol: 1e-6 })).toBeUndefined();
    }
    const got = compiled.stateDict();
    for (const [k, w] of Object.entries(reference.stateDict())) expect(compareTensors(k, got[k]!, w, { rtol: 1e-4, atol: 1e-6 })).toBeUndefined();
  });
});
