import { jest } from '@jest/globals';
import { Liveness, Options, ParallelPhasedExecution, Phase, SerialPhasedExecution, compileModelSource } from '@tilegraph/frontend';
import { Rng, Tensor } from '@tilegraph/ir';
import { makeOptimizer } from '@tilegraph/passes';
import { compiledBackend, referenceBackend, trainingModel } from '@tilegraph/runtime';

/**
 * Phased training on the emulated IPU: weights and the values passed between phases live in
 * remote buffers between phases (OffChipAfterEachPhase), and ParallelPhased alternates two IPUs;
 * losses and weights match the reference interpreter to float32 rounding.
 */

jest.setTimeout(20 * 60 * 1000);

const MODEL = `import "std/nn.tg"
model m(batch: int = 2, width: int = 16) {
  input x: f32[batch, width]
  input y: i32[batch]
  block "A" {
    let h = relu(linear(x, width, width) as a)
  }
  block "B" {
    let h = relu(linear(h, width, width) as b)
  }
  block "C" {
    output logits = linear(h, width, 4) as c
    loss = cross_entropy(logits, y)
  }
}`;

function data(n: number, seed: number): Record<string, Tensor> {
  const rng = new Rng(seed);
  return {
    x: Tensor.from('float32', [n, 16], Array.from({ length: n * 16 }, () => rng.normal())),
    y: Tensor.from('int32', [n], Array.from({ length: n }, () => rng.nextU32() % 4)),
  };
}

const close = (a: ArrayLike<number>, b: ArrayLike<number>) => {
  expect(a.length).toBe(b.length);
  for (let i = 0; i < a.length; i++) expect(Math.abs(a[i]! - b[i]!)).toBeLessThanOrEqual(1e-5 + 1e-4 * Math.abs(b[i]!));
};

test.each([
  ['serial, OffChipAfterEachPhase', () => new SerialPhasedExecution(new Phase('A'), new Phase('B'), new Phase('C')).setTensorsLiveness(Liveness.OffChipAfterEachPhase)],
  ['parallel, off chip after the forward pass', () => new ParallelPhasedExecution(new Phase('A'), new Phase('B'), new Phase('C')).sendTensorsOffChipAfterFwd()],
])('%s', (_, strategy) => {
  const model = (backend: typeof compiledBackend) => {
    const o = new Options();
    o.Training.gradientAccumulation(2);
    o.setExecutionStrategy(strategy());
    return trainingModel(compileModelSource(MODEL, 'phased.tg'), o, makeOptimizer('SGD', { lr: 0.05, momentum: 0.9 }), { backend });
  };
  const got = model(compiledBackend);
  const want = model(referenceBackend);
  for (const seed of [1, 2, 3]) close(got.run(data(4, seed))[got.lossOutput]!.data, want.run(data(4, seed))[want.lossOutput]!.data);
  const w = want.stateDict();
  for (const [n, t] of Object.entries(got.stateDict())) close(t.data, w[n]!.data);
});
