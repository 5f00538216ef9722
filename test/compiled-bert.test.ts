import { jest } from '@jest/globals';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Options, TensorLocationSettings, loadModelFile } from '@tilegraph/frontend';
import { Rng, Tensor } from '@tilegraph/ir';
import { makeOptimizer } from '@tilegraph/passes';
import { compiledBackend, referenceBackend, trainingModel } from '@tilegraph/runtime';

/**
 * The BERT-shaped example, made small, trained with Adam on the emulated IPU pipelined over 2 IPUs with a
 * checkpoint per layer and RecomputeAll, the optimizer state off chip (one weight's update at a
 * time) and gradient accumulation 3 (the pipeline's 3 stages): bit for bit the losses and weights of the same model trained
 * without any of these on the emulated IPU, and the reference interpreter's losses to rounding.
 * (Adam's weights are compared bit for bit between the two compiled runs only: a gradient at the
 * level of rounding noise moves an Adam weight by up to the learning rate, so weights of
 * differently rounded runs need not be close.)
 */

jest.setTimeout(20 * 60 * 1000);
const BERT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../examples/bert.tg');
const ARGS = { batch: 2, seq: 8, d_model: 16, heads: 2, ff: 32, layers: 2, ipus: 2, classes: 3 };

function inputs(runs: number, seed: number): Record<string, Tensor> {
  const rng = new Rng(seed);
  const n = 2 * runs;
  return {
    x: Tensor.from('float32', [n, 8, 16], Array.from({ length: n * 8 * 16 }, () => rng.normal())),
    y: Tensor.from('int32', [n], Array.from({ length: n }, () => rng.nextU32() % 3)),
  };
}

it('trains with recomputation, off-chip optimizer state and two IPUs exactly as without them', () => {
  const options = (fitted: boolean) => {
    const o = new Options();
    o.Training.gradientAccumulation(3);
    if (fitted) {
      o._Popart.set('autoRecomputation', 4);
      o.TensorLocations.setOptimizerLocation(new TensorLocationSettings().useOnChipStorage(false));
    }
    return o;
  };
  const model = (fitted: boolean, backend: typeof compiledBackend) =>
    trainingModel(loadModelFile(BERT, { args: { ...ARGS, checkpoints: fitted } }), options(fitted), makeOptimizer('Adam', { lr: 0.01 }), { backend });
  const got = model(true, compiledBackend);
  const plain = model(false, compiledBackend);
  const reference = model(false, referenceBackend);
  expect(got.compiledModule().graphs.has('update_0')).toBe(true);
  for (const seed of [1, 2, 3]) {
    const a = got.run(inputs(3, seed))[got.lossOutput]!;
    const b = plain.run(inputs(3, seed))[plain.lossOutput]!;
    const c = reference.run(inputs(3, seed))[reference.lossOutput]!;
    expect(Array.from(a.data)).toEqual(Array.from(b.data));
    Array.from(c.data).forEach((x, i) => expect(Math.abs(a.data[i]! - x)).toBeLessThanOrEqual(1e-5 + 1e-4 * Math.abs(x)));
  }
  const gw = got.stateDict();
  for (const [name, t] of Object.entries(plain.stateDict())) expect([name, Array.from(gw[name]!.data)]).toEqual([name, Array.from(t.data)]);
  expect(got.warnings).toEqual([]);
});
