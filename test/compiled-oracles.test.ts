import { jest } from '@jest/globals';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { importOnnxFile, loadModelFile } from '@tilegraph/frontend';
import { compiledBackend } from '@tilegraph/runtime';
import { ORACLES, loadFixture, oraclesPresent, replay, withCrossEntropy, worstViolation } from './support/oracles.js';

/**
 * The PyTorch trajectories on the compiled executable (generated Poplar C++ built against the
 * poplar-host emulation): every optimizer, accumulation, replication, reduction and clipping case
 * of the MLP, and a cover of the others, within the oracles' tolerances.
 */

jest.setTimeout(20 * 60 * 1000);
const EXAMPLES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../examples');
if (!oraclesPresent) console.log(`compiled-oracles: skipped, ${ORACLES} is absent (CI has it beside the clone)`);
const describeIfOracles = oraclesPresent ? describe : describe.skip;

const CASES: [string, 'onnx' | 'tg', string][] = [
  ...['sgd_A1_R1_mean', 'sgd_A2_R2_mean', 'sgd_A2_R1_sum', 'sgd_A2_R2_mean_clip0.5', 'sgd_momentum_A4_R1_mean_clip0.5', 'sgd_nesterov_A2_R1_sum', 'adam_A2_R2_mean', 'adamw_A4_R1_mean', 'rmsprop_A2_R2_mean', 'lamb_A2_R2_mean'].map(
    (t): [string, 'onnx' | 'tg', string] => ['mlp', 'onnx', t],
  ),
  ['mlp_tanh', 'tg', 'adam_A2_R2_mean'],
  ['mlp_tanh', 'onnx', 'sgd_momentum_A4_R1_mean_clip0.5'],
  ['cnn', 'onnx', 'sgd_A2_R2_mean'],
  ['cnn', 'tg', 'lamb_A2_R2_mean'],
];

describeIfOracles('oracle trajectories on the compiled executable', () => {
  test.each(CASES)('%s (%s) %s', (model, source, name) => {
    const fix = loadFixture(model);
    const t = fix.trajectories.find((x) => x.name === name)!;
    const graph =
      source === 'onnx'
        ? withCrossEntropy(importOnnxFile(path.join(ORACLES, `${model}.onnx`), { inputShapes: { x: t.data[0]!.x.shape } }).graph)
        : loadModelFile(path.join(EXAMPLES, `${model}.tg`), { args: { batch: t.micro_batch } });
    const res = replay(graph, fix, t, compiledBackend);
    t.per_step.forEach((step, s) => {
      expect(worstViolation(res.losses[s]!, step.losses, 1e-5, 1e-4)).toBeLessThanOrEqual(0);
      for (const [p, want] of Object.entries(step.params_after)) {
        const v = worstViolation(res.params[s]![p]!.data, want, 1e-5, 1e-4, t.noise_sensitive[p] ?? []);
        if (v > 0) throw new Error(`${name} step ${s} ${p}: off by ${v} beyond tolerance`);
      }
    });
  });
});
