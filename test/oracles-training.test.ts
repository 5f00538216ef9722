import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { importOnnxFile, loadModelFile } from '@tilegraph/frontend';
import { ORACLES, loadFixture, oraclesPresent, replay, withCrossEntropy, worstViolation } from './support/oracles.js';

/**
 * Training against PyTorch: every trajectory of ../shared/oracles (optimizers × accumulation ×
 * replication × reduction × clipping) is replayed with trainingModel on the reference backend
 * from the ONNX export and from the same model written in the model language (examples/); losses and parameters after every step must match (README tolerances:
 * atol 1e-5, rtol 1e-4; noise-sensitive entries skipped).
 */

const EXAMPLES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../examples');

if (!oraclesPresent) console.log(`oracles-training: skipped, ${ORACLES} is absent (CI has it beside the clone)`);
const describeIfOracles = oraclesPresent ? describe : describe.skip;

describeIfOracles.each(['mlp', 'mlp_tanh', 'cnn'])('%s (ONNX) trajectories match PyTorch', (model) => {
  const fix = oraclesPresent ? loadFixture(model) : undefined;
  const names = fix ? fix.trajectories.map((t) => t.name) : [];
  test.each(names)('%s', (name) => {
    const t = fix!.trajectories.find((x) => x.name === name)!;
    const x0 = t.data[0]!.x;
    const { graph } = importOnnxFile(path.join(ORACLES, `${model}.onnx`), { inputShapes: { x: x0.shape } });
    const res = replay(withCrossEntropy(graph), fix!, t);
    t.per_step.forEach((step, s) => {
      expect(worstViolation(res.losses[s]!, step.losses, 1e-5, 1e-4)).toBeLessThanOrEqual(0);
      for (const [p, want] of Object.entries(step.params_after)) {
        const got = res.params[s]![p]!;
        // params_after holds the flat row-major values
        expect(got.size).toBe(want.length);
        const v = worstViolation(got.data, want, 1e-5, 1e-4, t.noise_sensitive[p] ?? []);
        if (v > 0) throw new Error(`${name} step ${s} ${p}: off by ${v} beyond tolerance`);
      }
    });
  });
});

describeIfOracles.each(['mlp', 'mlp_tanh', 'cnn'])('%s (model language) trajectories match PyTorch', (model) => {
  const fix = oraclesPresent ? loadFixture(model) : undefined;
  const names = fix ? fix.trajectories.map((t) => t.name) : [];
  test.each(names)('%s', (name) => {
    const t = fix!.trajectories.find((x) => x.name === name)!;
    const graph = loadModelFile(path.join(EXAMPLES, `${model}.tg`), { args: { batch: t.micro_batch } });
    const res = replay(graph, fix!, t);
    t.per_step.forEach((step, s) => {
      expect(worstViolation(res.losses[s]!, step.losses, 1e-5, 1e-4)).toBeLessThanOrEqual(0);
      for (const [p, want] of Object.entries(step.params_after)) {
        const v = worstViolation(res.params[s]![p]!.data, want, 1e-5, 1e-4, t.noise_sensitive[p] ?? []);
        if (v > 0) throw new Error(`${name} step ${s} ${p}: off by ${v} beyond tolerance`);
      }
    });
  });
});
