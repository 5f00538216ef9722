import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileModelSource } from '@tilegraph/frontend';
import { generatePoplar } from '@tilegraph/codegen-poplar';
import { DEFAULT_STEP, buildInferenceModule, buildTrainingModule, makeOptimizer } from '@tilegraph/passes';

/**
 * Each convolution reaches PopLibs planned for the pass PopART gives it: INFERENCE_FWD in an
 * inference program; in training TRAINING_FWD for the forward convolutions, TRAINING_BWD for the
 * gradient with respect to a forward input, and the weight gradients built as PopLibs builds
 * them, by poplin::calculateWeightDeltas with the forward ConvParams and TRAINING_WU.
 */

const EXAMPLES = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../examples');
const SOURCE = [
  'import "std/nn.tg"',
  'model two_convs(batch: int = 2) {',
  '  input x: f32[batch, 2, 8, 8]',
  '  input y: i32[batch]',
  '  let h = relu(conv(x, 2, 4, kernel=3, padding=1) as c1)',
  '  let h = relu(conv(h, 4, 4, kernel=3, padding=1) as c2)',
  '  output logits = linear(flatten(h), 256, 10) as fc',
  '  loss = cross_entropy(logits, y)',
  '}',
].join('\n');

/** The `pass` of every poplin::convolution and poplin::calculateWeightDeltas call, in order. */
function passes(host: string): { conv: string[]; wu: string[] } {
  const options = new Map<string, string>();
  for (const m of host.matchAll(/const poplar::OptionFlags (\w+)\{.*\{"pass", "(\w+)"\}\};/g)) options.set(m[1]!, m[2]!);
  const of = (call: string) => [...host.matchAll(new RegExp(`poplin::${call}\\(.*, (\\w+)\\)`, 'g'))].map((m) => options.get(m[1]!) ?? 'none');
  return { conv: of('convolution'), wu: of('calculateWeightDeltas') };
}

/** The ConvParams expressions of the calls to poplin::`call` (with option set pass = `pass`, if given). */
function paramsOf(host: string, call: string, pass?: string): string[] {
  const params = new Map<string, string>();
  for (const m of host.matchAll(/poplin::ConvParams (\w+) = (.*);/g)) params.set(m[1]!, m[2]!);
  const options = new Map<string, string>();
  for (const m of host.matchAll(/const poplar::OptionFlags (\w+)\{.*\{"pass", "(\w+)"\}\};/g)) options.set(m[1]!, m[2]!);
  return [...host.matchAll(new RegExp(`poplin::${call}\\(.*, (p\\d+), (?:false, )?prog, .*, (\\w+)\\)`, 'g'))]
    .filter((m) => pass === undefined || options.get(m[2]!) === pass)
    .map((m) => params.get(m[1]!) ?? 'none');
}

const graph = () => compileModelSource(SOURCE, path.join(EXAMPLES, 'two_convs.tg'));

test('inference: every convolution is INFERENCE_FWD, and no weight gradient', () => {
  const host = generatePoplar(buildInferenceModule(graph(), DEFAULT_STEP)).files['host.cpp'];
  expect(passes(host)).toEqual({ conv: ['INFERENCE_FWD', 'INFERENCE_FWD'], wu: [] });
});

test('training: two forward convolutions, the gradient of the first one\'s activations, two weight gradients', () => {
  const module = buildTrainingModule(graph(), DEFAULT_STEP, makeOptimizer('SGD', { lr: 0.1 })).module;
  const host = generatePoplar(module).files['host.cpp'];
  const p = passes(host);
  // the input x needs no gradient, so only the second convolution has a TRAINING_BWD one
  expect(p.conv.sort()).toEqual(['TRAINING_BWD', 'TRAINING_FWD', 'TRAINING_FWD']);
  expect(p.wu).toEqual(['TRAINING_WU', 'TRAINING_WU']);
  // with the forward convolutions' ConvParams (2 -> 4 and 4 -> 4 channels, 3x3 kernels, padding 1)
  expect(paramsOf(host, 'calculateWeightDeltas').sort()).toEqual(paramsOf(host, 'convolution', 'TRAINING_FWD').sort());
});

test('weights and inputs made in a convolution\'s layout are created with the convolution\'s own option flags', () => {
  const module = buildTrainingModule(graph(), DEFAULT_STEP, makeOptimizer('SGD', { lr: 0.1 })).module;
  const host = generatePoplar(module).files['host.cpp'];
  const created = [...host.matchAll(/poplin::(createWeights|createInput)\(.*?, "([\w.]+)", poplar::OptionFlags(\{.*?\}\})\)/g)].map((m) => [m[1], m[2], m[3]]);
  expect(created.map(([call, name]) => `${call} ${name}`).sort()).toEqual(['createInput x', 'createWeights c1.weight', 'createWeights c2.weight']);
  for (const [, , flags] of created) expect(flags).toBe('{{"availableMemoryProportion", "0.6"}, {"partialsType", "float"}, {"pass", "TRAINING_FWD"}}');
});
