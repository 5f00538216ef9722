import * as path from 'node:path';
import { importOnnxFile } from '@tilegraph/frontend';
import { differentiate, findFinalLoss } from '@tilegraph/passes';
import { runGraph } from '@tilegraph/runtime';
import { ORACLES, loadFixture, oraclesPresent, tensorOf, withCrossEntropy, worstViolation } from './support/oracles.js';

/**
 * The whole model's gradient against PyTorch: each ONNX oracle model with CrossEntropyLoss(mean)
 * appended is differentiated with `differentiate`, the gradients become graph outputs, and the
 * reference interpreter's values must match the fixture's float64 autograd (`grads_f64`) within
 * atol 1e-5, rtol 1e-4 — and the loss must match `loss_f64`.
 */

if (!oraclesPresent) console.log(`oracles-gradients: skipped, ${ORACLES} is absent (the fixtures live beside the clone, not in it)`);
const describeIfOracles = oraclesPresent ? describe : describe.skip;

describeIfOracles.each(['mlp', 'mlp_tanh', 'cnn'])('%s (ONNX): gradient of the cross-entropy loss', (model) => {
  test('matches grads_f64 for every parameter', () => {
    const fix = loadFixture(model);
    const x = tensorOf(fix.inputs.x);
    const y = tensorOf(fix.inputs.y, 'int32');
    const { graph } = importOnnxFile(path.join(ORACLES, `${model}.onnx`), { inputShapes: { x: x.shape } });
    const g = withCrossEntropy(graph);
    const loss = findFinalLoss(g).result;
    const params = new Map(g.parameters().map((p) => [p.attrs['name'] as string, p.result]));
    for (const name of fix.param_names) if (!params.has(name)) throw new Error(`${model}: the imported graph has no parameter '${name}'`);
    const grads = differentiate(g, { loss, wrt: fix.param_names.map((n) => params.get(n)!) });
    for (const name of fix.param_names) {
      const gv = grads.get(params.get(name)!);
      if (!gv) throw new Error(`${model}: no gradient reaches '${name}'`);
      g.addOutput(`grad:${name}`, gv);
    }
    const res = runGraph(g, { x, y }, { parameters: Object.fromEntries(fix.param_names.map((n) => [n, tensorOf(fix.params[n]!)])) });
    const lossF64 = (fix as unknown as { loss_f64: number }).loss_f64;
    expect(worstViolation(res.outputs['loss']!.data, [lossF64], 1e-5, 1e-4)).toBeLessThanOrEqual(0);
    for (const name of fix.param_names) {
      const got = res.outputs[`grad:${name}`]!;
      const want = fix.grads_f64[name]!;
      expect(got.shape).toEqual(want.shape);
      const v = worstViolation(got.data, want.data, 1e-5, 1e-4);
      if (v > 0) throw new Error(`${model} ${name}: gradient off by ${v} beyond atol 1e-5 + rtol 1e-4`);
    }
  });
});
