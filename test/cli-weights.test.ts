import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Tensor, tensorsIdentical } from '@tilegraph/ir';
import { loadWeights, readWeights, runGraph, saveWeights } from '@tilegraph/runtime';
import { loadModel } from '../tools/src/load.js';
import { syntheticInputs } from '../tools/src/commands/run.js';
import { formatTensor } from '../tools/src/format.js';
import { ROOT, runCli } from './support/cli.js';

/**
 * `train --save` writes safetensors or JSON by the extension (any other name is refused before
 * training), and `run --weights` runs the model with the weights a training wrote.
 */

const run = (...args: string[]) => runCli(args, 60_000);

describe('train --save and run --weights', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-weights-cli-'));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const st = path.join(tmp, 'w.safetensors');
  const json = path.join(tmp, 'w.json');
  const train = (save: string) => run('train', 'examples/mlp.tg', '--steps', '2', '--backend', 'reference', '--no-progress', '--save', save);

  test('both formats hold the same trained weights', () => {
    for (const file of [st, json]) {
      const r = train(file);
      expect(r.err).toBe('');
      expect(r.code).toBe(0);
      expect(r.out).toContain(`weights written to ${file}`);
    }
    const a = readWeights(st);
    const b = loadWeights(json);
    expect(Object.keys(a.tensors).sort()).toEqual(['fc1.bias', 'fc1.weight', 'fc2.bias', 'fc2.weight']);
    for (const k of Object.keys(a.tensors)) expect(tensorsIdentical(a.tensors[k]!, b[k]!)).toBe(true);
    expect(a.metadata).toMatchObject({ producer: 'tilegraph', model: 'mlp', steps: '2', optimizer: 'SGD' });
    expect(fs.readdirSync(tmp).sort()).toEqual(['w.json', 'w.safetensors']);
  });

  test('run --weights gives the outputs of the trained model', () => {
    const g = loadModel(path.join(ROOT, 'examples/mlp.tg'));
    const weights = loadWeights(st);
    const { outputs } = runGraph(g, syntheticInputs(g, 0, 2), { seed: 0, parameters: weights });
    const expected = Object.entries(outputs).map(([name, t]) => `${name} = ${formatTensor(t)}\n`).join('');

    const r = run('run', 'examples/mlp.tg', '--weights', st);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toContain(`4 parameters from ${st}`);
    expect(r.out.slice(r.out.indexOf('\n') + 1)).toBe(expected);
    const fromJson = run('run', 'examples/mlp.tg', '--weights', json);
    expect(fromJson.out.slice(fromJson.out.indexOf('\n') + 1)).toBe(expected);
    // and the initial weights give other outputs
    const initial = run('run', 'examples/mlp.tg');
    expect(initial.out.slice(initial.out.indexOf('\n') + 1)).not.toBe(expected);
  });

  test('--save with another extension is refused before training (exit 2)', () => {
    const bad = path.join(tmp, 'w.txt');
    const r = train(bad);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/--save .*w\.txt: name the file \.safetensors .* or \.json/);
    expect(r.out).not.toContain('training');
    expect(fs.existsSync(bad)).toBe(false);
  });

  test('weights that do not fit the model are a diagnostic listing them (exit 1)', () => {
    const other = path.join(tmp, 'other.safetensors');
    saveWeights(other, { 'fc1.weight': Tensor.zeros('float32', [16, 32]), 'fc2.bias': Tensor.zeros('int32', [10]), extra: Tensor.zeros('float32', [1]) });
    const r = run('run', 'examples/mlp.tg', '--weights', other);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`${other}: the weights do not fit the model 'mlp'`);
    expect(r.err).toContain("not parameters of the model: 'extra'");
    expect(r.err).toContain("missing: 'fc1.bias', 'fc2.weight'");
    expect(r.err).toContain("'fc1.weight' is f32[32,16] in the model but float32[16,32] in the file");
    expect(r.err).toContain("'fc2.bias' is f32[10] in the model but int32[10] in the file");
  });

  test('a missing or broken weights file', () => {
    const missing = run('run', 'examples/mlp.tg', '--weights', path.join(tmp, 'none.safetensors'));
    expect(missing.code).toBe(2);
    expect(missing.err).toMatch(/no such file: .*none\.safetensors \(the weights file\)/);
    const broken = path.join(tmp, 'broken.safetensors');
    fs.writeFileSync(broken, 'not weights at all');
    const r = run('run', 'examples/mlp.tg', '--weights', broken);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/broken\.safetensors: not a safetensors file \(its header length \d+ runs past the end/);
  });
});
