import { jest } from '@jest/globals';
import fc from 'fast-check';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadModelFile } from '@tilegraph/frontend';
import { generatePoplar } from '@tilegraph/codegen-poplar';
import { Graph, Module, Rng, Tensor } from '@tilegraph/ir';
import { StepSettings, buildTrainingModule, makeOptimizer } from '@tilegraph/passes';
import { expectSameRuns } from './support/same-runs.js';
import { trainableArb, trainableGraph, trainableInputs } from './support/trainable.js';

/**
 * Fewer, larger compute sets: the generator puts independent generated-vertex work into one
 * compute set (GenerateOptions.mergeComputeSets, on by default). The examples' training steps
 * have fewer compute sets than with one per op, and train to the same bits on the emulated IPU.
 */

jest.setTimeout(20 * 60 * 1000);
const EXAMPLES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../examples');

const SETTINGS: StepSettings = { deviceIterations: 1, replicationFactor: 1, gradientAccumulation: 1, reduction: 'mean', recomputation: 'none' };

function trainingModule(name: string, optimizer: 'SGD' | 'Adam', settings: StepSettings = SETTINGS): { module: Module; graph: Graph } {
  const graph = loadModelFile(path.join(EXAMPLES, `${name}.tg`));
  return { module: buildTrainingModule(graph, settings, makeOptimizer(optimizer, { lr: 0.01 })).module, graph };
}

function computeSets(m: Module, mergeComputeSets: boolean): number {
  return generatePoplar(m, { mergeComputeSets }).files['host.cpp'].split('addComputeSet(').length - 1;
}

describe('merged compute sets', () => {
  it.each([
    ['mlp', 'SGD'],
    ['mlp', 'Adam'],
    ['transformer', 'SGD'],
    ['transformer', 'Adam'],
  ] as const)('examples/%s.tg training (%s) has fewer compute sets', (name, optimizer) => {
    const { module } = trainingModule(name, optimizer);
    const merged = computeSets(module, true);
    const separate = computeSets(module, false);
    expect(merged).toBeLessThan(separate);
    // the optimizer's updates of the weights are independent: far fewer compute sets
    expect(merged).toBeLessThanOrEqual(0.85 * separate);
  });

  it.each(['SGD', 'Adam'] as const)('the MLP update graph (%s) runs the updates of all its weights side by side', (optimizer) => {
    const { module } = trainingModule('mlp', optimizer);
    const updateSets = (mergeComputeSets: boolean) => {
      const host = generatePoplar(module, { mergeComputeSets }).files['host.cpp'];
      const update = host.slice(host.indexOf('// graph update\n'));
      return update.slice(0, update.indexOf('\n}\n')).split('addComputeSet(').length - 1;
    };
    const weights = [...module.variables.values()].filter((v) => v.role === 'weight').length;
    expect(weights).toBe(4);
    // one compute set per step of one weight's update (SGD 2, Adam 5), shared by all the weights
    const merged = updateSets(true);
    expect(merged).toBeLessThanOrEqual(optimizer === 'SGD' ? 2 : 5);
    expect(merged * weights).toBeLessThanOrEqual(updateSets(false) + 2);
  });

  /** Trains two runs with and without merged compute sets: the same bits in every output and variable. */
  const expectSameTraining = (module: Module, feeds: (run: number) => Record<string, Tensor[]>) => expectSameRuns(module, {}, { mergeComputeSets: false }, 2, feeds);

  it('generated dense models train to the same bits (property)', () => {
    fc.assert(
      fc.property(trainableArb.map((s) => ({ ...s, stages: 1 })), fc.constantFrom(1, 2), (spec, R) => {
        const settings: StepSettings = { ...SETTINGS, replicationFactor: R };
        const g = trainableGraph(spec, false);
        const module = buildTrainingModule(g, settings, makeOptimizer('Adam', { lr: 0.01 })).module;
        expectSameTraining(module, (run) => {
          const all = trainableInputs(spec, g, R, spec.seed + run);
          const out: Record<string, Tensor[]> = {};
          for (const [name, t] of Object.entries(all)) {
            const size = t.size / R;
            const shape = g.inputs().find((op) => op.attrs['name'] === name)!.result.type.shape;
            out[name] = Array.from({ length: R }, (_, k) => new Tensor(t.dtype, shape, t.data.slice(k * size, (k + 1) * size)));
          }
          return out;
        });
      }),
      { numRuns: 1, seed: 77 },
    );
  });

  it('examples/mlp.tg trains to the same bits with Adam on two replicas', () => {
    const settings: StepSettings = { ...SETTINGS, replicationFactor: 2 };
    const { module, graph } = trainingModule('mlp', 'Adam', settings);
    const rng = new Rng(5);
    expectSameTraining(module, () => {
      const out: Record<string, Tensor[]> = {};
      for (const op of graph.inputs()) {
        const t = op.result.type;
        const n = t.shape.reduce((a, b) => a * b, 1);
        out[op.attrs['name'] as string] = [0, 1].map(() => Tensor.from(t.dtype, t.shape, Array.from({ length: n }, () => (t.dtype === 'int32' ? rng.nextU32() % 10 : rng.normal()))));
      }
      return out;
    });
  });
});
