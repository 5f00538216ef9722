import { generatePoplar } from '@tilegraph/codegen-poplar';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ModelBuilder, Options, loadModelFile } from '@tilegraph/frontend';
import { stepSettingsFrom } from '@tilegraph/runtime';
import { Graph, Value } from '@tilegraph/ir';
import { DEFAULT_STEP, buildInferenceModule, buildTrainingModule, makeOptimizer } from '@tilegraph/passes';

/** The memory plan's figures move as the transforms that make models fit say they must. */

function peak(plan: ReturnType<typeof generatePoplar>['plan']): number {
  return plan.memory.perIpu[0]!.peakLiveBytes;
}

describe('memory plan under the fitting transforms', () => {
  /** x[256, 1024] @ w[1024, 4096], serialised or not. */
  function bigMatmul(serialize?: { mode: 'output_channels' | 'input_channels' | 'reducing_dim'; factor: number }) {
    const m = new ModelBuilder('big');
    const x = m.input('x', 'float32', [256, 1024]);
    const w = m.parameter('w', 'float32', [1024, 4096], { kind: 'init', fn: 'zeros', args: {} });
    m.output('y', serialize ? m.serializedMatMul(x, w, serialize.mode, serialize.factor) : m.matmul(x, w));
    return m.graph;
  }

  // reducing_dim is left out: its pieces each make a full-size partial product that is summed
  // afterwards, so it trades temporary memory for those products rather than saving it
  it.each(['output_channels', 'input_channels'] as const)('serialising the largest matmul (%s, factor 4) lowers its temporary memory', (mode) => {
    const plain = generatePoplar(buildInferenceModule(bigMatmul(), DEFAULT_STEP)).plan;
    const split = generatePoplar(buildInferenceModule(bigMatmul({ mode, factor: 4 }), DEFAULT_STEP)).plan;
    // the product itself (4 MiB) is the same; each piece's partial sums are a quarter of the whole's
    const product = 256 * 4096 * 4;
    const plainTemps = peak(plain) - product;
    const splitTemps = peak(split) - product;
    expect(splitTemps).toBeLessThan(0.75 * plainTemps);
    // the weights stay as they are
    expect(split.memory.perIpu[0]!.alwaysLiveBytes).toBe(plain.memory.perIpu[0]!.alwaysLiveBytes);
  });

  it('training: serialising the matmul lowers the step peak too', () => {
    const train = (g: Graph) => generatePoplar(buildTrainingModule(g, DEFAULT_STEP, makeOptimizer('SGD', { lr: 0.1 })).module).plan;
    const withLoss = (serialize?: { mode: 'output_channels'; factor: number }) => {
      const m = new ModelBuilder('big');
      const x = m.input('x', 'float32', [256, 1024]);
      const w = m.parameter('w', 'float32', [1024, 4096], { kind: 'init', fn: 'zeros', args: {} });
      const y = serialize ? m.serializedMatMul(x, w, serialize.mode, serialize.factor) : m.matmul(x, w);
      m.loss(m.op('reduce_mean', [m.op('mul', [y, y]) as Value], { axes: [], keepdims: false }) as Value);
      return m.graph;
    };
    expect(peak(train(withLoss({ mode: 'output_channels', factor: 4 })))).toBeLessThan(peak(train(withLoss())));
  });
});

describe('memory plan under recomputation', () => {
  it('the transformer example, four layers on one IPU: Standard lowers the training peak, RecomputeAll from per-layer checkpoints lowers it more', () => {
    const examples = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../examples');
    const planWith = (mode: number) => {
      const g = loadModelFile(path.join(examples, 'transformer.tg'), { args: { layers: 4, per_ipu: 4, checkpoints: true } });
      const o = new Options();
      o._Popart.set('autoRecomputation', mode);
      const module = buildTrainingModule(g, stepSettingsFrom(o), makeOptimizer('Adam', { lr: 1e-3 })).module;
      // merged weight updates keep their temporaries live together, which makes the update this
      // small model's peak, one recomputation does not touch: its effect is measured unmerged
      // (outlining, on by default, lowers the four layers' fullest tile by sharing their host code
      // and makes the layers' steps one unit each; it is measured with recomputation in
      // compiled-outlining.test.ts, and left out here, where the schedule op by op is the subject)
      const merged = generatePoplar(module, { outline: false }).plan.memory.perIpu[0]!;
      const separate = generatePoplar(module, { mergeComputeSets: false, outline: false }).plan.memory.perIpu[0]!;
      // what decides whether it fits, the fullest tile, does not change
      expect(merged.maxTileBytes).toBe(separate.maxTileBytes);
      return separate;
    };
    const kept = planWith(0);
    const standard = planWith(1);
    const all = planWith(4);
    expect(standard.peakLiveBytes).toBeLessThan(0.9 * kept.peakLiveBytes);
    expect(all.peakLiveBytes).toBeLessThan(0.6 * kept.peakLiveBytes);
    expect(all.maxTileBytes).toBeLessThan(kept.maxTileBytes);
    // weights and optimizer state stay; the recomputed ops add only their vertices' state
    expect(all.alwaysLiveBytes).toBeGreaterThanOrEqual(kept.alwaysLiveBytes);
    expect(all.alwaysLiveBytes).toBeLessThan(1.15 * kept.alwaysLiveBytes);
  });

  it('a BERT-shaped encoder with a checkpoint per layer: RecomputeAll lowers the training peak', () => {
    const examples = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../examples');
    const peakWith = (mode: number) => {
      const g = loadModelFile(path.join(examples, 'bert.tg'), { args: { layers: 4, ipus: 1, checkpoints: true } });
      const o = new Options();
      o._Popart.set('autoRecomputation', mode);
      const module = buildTrainingModule(g, stepSettingsFrom(o), makeOptimizer('Adam', { lr: 1e-4 })).module;
      // (unmerged weight updates, as in the test above)
      return generatePoplar(module, { mergeComputeSets: false }).plan.memory.perIpu[0]!;
    };
    const kept = peakWith(0);
    const recomputed = peakWith(4);
    expect(recomputed.peakLiveBytes).toBeLessThan(0.75 * kept.peakLiveBytes);
    // the weights and optimizer state do not move
    expect(Math.abs(recomputed.alwaysLiveBytes - kept.alwaysLiveBytes)).toBeLessThan(0.01 * kept.alwaysLiveBytes);
  });
});
