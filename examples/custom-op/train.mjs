// Trains leaky.tg, whose hidden activation is the custom op leaky_relu, on the (emulated) IPU.
// The op is registered first: its result type (that of its input), its Poplar codelet, its
// WebAssembly reference kernel (leaky_relu.wasm, assembled from leaky_relu.wat) and its gradient,
// itself a custom op (leaky_relu_grad).
//
//   npx tsc -b && node examples/custom-op/train.mjs [--backend reference] [--steps N]
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Options, loadModelFile, registerCustomOp } from '@tilegraph/frontend';
import { Tensor } from '@tilegraph/ir';
import { makeOptimizer } from '@tilegraph/passes';
import { referenceBackend, trainingModel } from '@tilegraph/runtime';

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const sameType = ([x]) => [x];

registerCustomOp({
  name: 'leaky_relu',
  inputs: ['x'],
  attributes: [{ name: 'alpha', type: 'float', default: 0.01 }],
  outputs: { count: 1, infer: sameType },
  codelet: { file: 'leaky_relu.cpp', vertex: 'LeakyRelu', outputs: ['y'] },
  reference: { file: 'leaky_relu.wasm', entry: 'leaky_relu' },
  gradient: 'leaky_relu_grad',
  baseDir: here,
});
// the gradient op takes (inputs, outputs, output gradients) and gives one gradient per input
registerCustomOp({
  name: 'leaky_relu_grad',
  inputs: ['x', 'y', 'dy'],
  attributes: [{ name: 'alpha', type: 'float', default: 0.01 }],
  outputs: { count: 1, infer: sameType },
  codelet: { file: 'leaky_relu_grad.cpp', vertex: 'LeakyReluGrad', outputs: ['dx'] },
  reference: { file: 'leaky_relu_grad.wasm', entry: 'leaky_relu_grad' },
  baseDir: here,
});

// three classes of points in 4-D around three centres
const batch = 8;
function data(step) {
  const xs = [];
  const ys = [];
  for (let i = 0; i < batch; i++) {
    const c = (step * batch + i) % 3;
    const jitter = (k) => 0.3 * Math.sin(step * 7.1 + i * 3.7 + k * 1.3);
    for (let k = 0; k < 4; k++) xs.push((k === c ? 1 : 0) - (k === 3 ? 0.5 * c : 0) + jitter(k));
    ys.push(c);
  }
  return { x: Tensor.from('float32', [batch, 4], xs), y: Tensor.from('int32', [batch], ys) };
}

const settings = arg('--backend', 'ipu') === 'reference' ? { backend: referenceBackend } : {};
const model = trainingModel(loadModelFile(path.join(here, 'leaky.tg')), new Options().randomSeed(1), makeOptimizer('SGD', { lr: 0.3 }), settings);
const steps = Number(arg('--steps', '100'));
try {
  for (let s = 0; s < steps; s++) {
    const loss = model.run(data(s))['loss'].data[0];
    if (s % 10 === 0 || s === steps - 1) console.log(`step ${String(s).padStart(3)}  loss ${loss.toFixed(4)}`);
  }
} finally {
  model.dispose();
}
