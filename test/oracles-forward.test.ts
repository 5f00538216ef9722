import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { importOnnxFile } from '@tilegraph/frontend';
import { Tensor } from '@tilegraph/ir';
import { runGraph } from '@tilegraph/runtime';

/**
 * ONNX import + forward numerics against PyTorch: each oracle model (opset 17 and opset 13
 * exports) is imported, `inputs.x` is run through the reference interpreter, and the logits must
 * match the recorded float32 `forward` of PyTorch.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const ORACLES = path.resolve(here, '../../shared/oracles');
const present = fs.existsSync(path.join(ORACLES, 'index.json'));
if (!present) console.log(`oracles-forward: skipped, ${ORACLES} is absent (CI has it beside the clone)`);
const describeIfOracles = present ? describe : describe.skip;

interface JsonTensor {
  shape: number[];
  dtype: string;
  data: number[];
}

function toTensor(t: JsonTensor): Tensor {
  return Tensor.from('float32', t.shape, t.data);
}

describeIfOracles('ONNX oracles: forward pass matches PyTorch', () => {
  const models = ['mlp', 'mlp_tanh', 'cnn'];
  for (const model of models) {
    for (const file of [`${model}.onnx`, `${model}_op13.onnx`]) {
      test(file, () => {
        const fixture = JSON.parse(fs.readFileSync(path.join(ORACLES, `${model}.json`), 'utf8'));
        const x = toTensor(fixture.inputs.x);
        const { graph } = importOnnxFile(path.join(ORACLES, file), { inputShapes: { x: x.shape } });
        const { outputs } = runGraph(graph, { x });
        const logits = outputs['logits']!;
        const want = fixture.forward as JsonTensor;
        expect(logits.shape).toEqual(want.shape);
        let worst = 0;
        want.data.forEach((w, i) => {
          const got = logits.data[i]!;
          const excess = Math.abs(got - w) - (1e-5 + 1e-4 * Math.abs(w));
          worst = Math.max(worst, excess);
        });
        // every element within atol 1e-5 + rtol 1e-4
        expect(worst).toBeLessThanOrEqual(0);
      });
    }
  }
});
