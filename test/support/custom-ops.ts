import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { registerCustomOp } from '@tilegraph/frontend';

/** The custom ops of examples/custom-op, registered from their files as the example does. */

export const CUSTOM_EXAMPLE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../examples/custom-op');

export function registerLeakyRelu(): void {
  registerCustomOp({
    name: 'leaky_relu',
    inputs: ['x'],
    attributes: [{ name: 'alpha', type: 'float', default: 0.01 }],
    outputs: { count: 1, infer: ([x]) => [x!] },
    codelet: { file: 'leaky_relu.cpp', vertex: 'LeakyRelu', outputs: ['y'] },
    reference: { file: 'leaky_relu.wasm', entry: 'leaky_relu' },
    gradient: 'leaky_relu_grad',
    baseDir: CUSTOM_EXAMPLE,
  });
  registerCustomOp({
    name: 'leaky_relu_grad',
    inputs: ['x', 'y', 'dy'],
    attributes: [{ name: 'alpha', type: 'float', default: 0.01 }],
    outputs: { count: 1, infer: ([x]) => [x!] },
    codelet: { file: 'leaky_relu_grad.cpp', vertex: 'LeakyReluGrad', outputs: ['dx'] },
    reference: { file: 'leaky_relu_grad.wasm', entry: 'leaky_relu_grad' },
    baseDir: CUSTOM_EXAMPLE,
  });
}
