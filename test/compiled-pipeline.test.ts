import { jest } from '@jest/globals';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Options, OutputMode, PipelinedExecution, loadModelFile } from '@tilegraph/frontend';
import { Rng, Tensor } from '@tilegraph/ir';
import { OptimizerSpec, makeOptimizer } from '@tilegraph/passes';
import { compiledBackend, referenceBackend, trainingModel } from '@tilegraph/runtime';

/**
 * Pipelined training on the emulated IPU: the transformer example split into 2 stages (with 2
 * replicas) and into 4 stages gives the reference interpreter's losses and weights to float32
 * rounding. (The reference interpreter's pipelined runs equal its unpipelined ones bit for bit:
 * test/pipeline.test.ts.)
 */

jest.setTimeout(20 * 60 * 1000);
const T = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../examples/transformer.tg');

function inputs(n: number, seed: number): Record<string, Tensor> {
  const rng = new Rng(seed);
  return {
    x: Tensor.from('float32', [n, 8, 16], Array.from({ length: n * 8 * 16 }, () => rng.normal())),
    y: Tensor.from('int32', [n], Array.from({ length: n }, () => rng.nextU32() % 5)),
  };
}

function close(a: ArrayLike<number>, b: ArrayLike<number>, atol: number, rtol: number): void {
  expect(a.length).toBe(b.length);
  for (let i = 0; i < a.length; i++) expect(Math.abs(a[i]! - b[i]!)).toBeLessThanOrEqual(atol + rtol * Math.abs(b[i]!));
}

test.each([
  [2, 3, 2, 'SGD'],
  [4, 7, 1, 'SGD'],
] as const)('the transformer example in %i stages, accumulation %i, %i replica(s), %s', (layers, A, R, name) => {
  const opt: OptimizerSpec = name === 'SGD' ? makeOptimizer('SGD', { lr: 0.05, momentum: 0.9 }) : makeOptimizer('Adam', { lr: 0.01 });
  const model = (backend: typeof compiledBackend) => {
    const o = new Options().replicationFactor(R).outputMode(OutputMode.All);
    o.Training.gradientAccumulation(A);
    o.setExecutionStrategy(new PipelinedExecution());
    return trainingModel(loadModelFile(T, { args: { batch: 1, layers } }), o, opt, { backend });
  };
  const got = model(compiledBackend);
  const want = model(referenceBackend);
  for (const seed of [1, 2, 3]) close(got.run(inputs(A * R, seed))[got.lossOutput]!.data, want.run(inputs(A * R, seed))[want.lossOutput]!.data, 1e-5, 1e-4);
  const w = want.stateDict();
  for (const [n, t] of Object.entries(got.stateDict())) close(t.data, w[n]!.data, 1e-5, 1e-4);
  expect([...got.compiledModule().graphs.keys()].filter((g) => g.startsWith('stage')).length).toBe(2 * layers - 1);
});
