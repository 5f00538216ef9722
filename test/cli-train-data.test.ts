import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Rng, Tensor, tensorsIdentical } from '@tilegraph/ir';
import { ONNX_DTYPE, onnxTesting } from '@tilegraph/frontend';
import { loadWeights } from '@tilegraph/runtime';
import { encodeNpy } from '../tools/src/data/npy.js';
import { encodeNpz } from '../tools/src/data/arrays.js';
import { TeacherDataset, inputRoles } from '../tools/src/data/synthetic.js';
import { loadModel } from '../tools/src/load.js';
import { runCli } from './support/cli.js';

/**
 * `tilegraph train` on real data: .npz files, folders of .npy files and JavaScript dataset modules;
 * evaluation per epoch; checkpoints that resume bit for bit; weights loaded from safetensors or
 * ONNX and saved back into an ONNX model.
 */

const run = (...args: string[]) => runCli(args, 600_000);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-train-data-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
const at = (...p: string[]) => path.join(tmp, ...p);

/** A learnable task for examples/mlp.tg: x [n,16] normal, y the arg-max of a fixed linear map. */
function task(n: number, seed: number): { x: Tensor; y: Tensor } {
  const rng = new Rng(seed, 3);
  const w = Array.from({ length: 160 }, () => rng.normal());
  const xs = Array.from({ length: n * 16 }, () => rng.normal());
  const ys = Array.from({ length: n }, (_, i) => {
    let best = 0;
    for (let c = 1; c < 10; c++) {
      const score = (k: number) => xs.slice(i * 16, i * 16 + 16).reduce((a, v, f) => a + v * w[k * 16 + f]!, 0);
      if (score(c) > score(best)) best = c;
    }
    return best;
  });
  return { x: Tensor.from('float32', [n, 16], xs), y: Tensor.from('int32', [n], ys) };
}

const train = task(40, 1);
const evalSet = task(12, 2);
fs.writeFileSync(at('train.npz'), encodeNpz(train));
fs.writeFileSync(at('eval.npz'), encodeNpz(evalSet));
fs.mkdirSync(at('folder'));
fs.writeFileSync(at('folder', 'x.npy'), encodeNpy(train.x));
fs.writeFileSync(at('folder', 'y.npy'), encodeNpy(train.y));
fs.writeFileSync(at('folder', 'README.txt'), 'not an array: ignored');
const rows = Array.from({ length: 40 }, (_, i) => Array.from(train.x.data.slice(i * 16, (i + 1) * 16)));
const labels = Array.from(train.y.data);
fs.writeFileSync(
  at('dataset.mjs'),
  `const x = ${JSON.stringify(rows)};\nconst y = ${JSON.stringify(labels)};\nexport default { length: x.length, get(i) { return { x: Float32Array.from(x[i]), y: y[i] }; } };\n`,
);
fs.writeFileSync(
  at('stream.mjs'),
  `const x = ${JSON.stringify(rows)};\nconst y = ${JSON.stringify(labels)};\nexport default async function* samples() { for (let i = 0; i < x.length; i++) yield { x: x[i], y: y[i] }; }\n`,
);

const ok = (r: { code: number | null; out: string; err: string }) => {
  if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.err}`);
  return r.out;
};
const bytes = (f: string) => fs.readFileSync(f);
const REF = ['--backend', 'reference'];

describe('train on data files', () => {
  test('an .npz, a folder of .npy files and .js datasets (map-style and async iterable) give the same training', () => {
    const saved = ['train.npz', 'folder', 'dataset.mjs', 'stream.mjs'].map((d, k) => {
      const file = at(`from-${k}.safetensors`);
      const out = ok(run('train', 'examples/mlp.tg', '--data', at(d), '--steps', '6', ...REF, '--optimizer', 'adam', '--lr', '0.01', '--save', file));
      expect(out).toContain(`from ${at(d)} (40 samples), 10 steps an epoch, shuffled`);
      return bytes(file);
    });
    for (const b of saved.slice(1)) expect(b.equals(saved[0]!)).toBe(true);
    // the data does matter: another seed shuffles otherwise
    ok(run('train', 'examples/mlp.tg', '--data', at('train.npz'), '--steps', '6', ...REF, '--optimizer', 'adam', '--lr', '0.01', '--seed', '1', '--save', at('seed1.safetensors')));
    expect(bytes(at('seed1.safetensors')).equals(saved[0]!)).toBe(false);
  });

  test('piped output has a line per step; --epochs counts passes over the data', () => {
    const out = ok(run('train', 'examples/mlp.tg', '--data', at('train.npz'), '--epochs', '2', ...REF, '--no-shuffle'));
    expect(out).toContain('20 steps of 4 samples');
    for (let s = 1; s <= 20; s++) expect(out).toMatch(new RegExp(`^step +${s}/20  loss \\d+\\.\\d{4}  [\\d.]+ samples/s$`, 'm'));
    expect(out).toMatch(/^epoch 1\/2: train loss \d+\.\d{4} \(mean of 10 steps\)$/m);
    expect(out).toMatch(/^epoch 2\/2: train loss/m);
  });

  test('--eval-data: the mean loss and the accuracy of the arg-max over dim 1, after each epoch', () => {
    const w = at('evaluated.safetensors');
    const out = ok(run('train', 'examples/mlp.tg', '--data', at('train.npz'), '--eval-data', at('eval.npz'), '--epochs', '3', ...REF, '--optimizer', 'adam', '--lr', '0.02', '--save', w));
    const evals = [...out.matchAll(/^epoch (\d): eval loss (\d+\.\d+), accuracy (\d\.\d+) \(12 samples\)$/gm)];
    expect(evals.map((m) => m[1])).toEqual(['1', '2', '3']);
    // the last one, checked against the trained weights run over the whole evaluation set
    const r = JSON.parse(ok(run('run', 'examples/mlp.tg', '--inputs', at('eval.npz'), '--weights', w, '--json'))) as { outputs: Record<string, { data: number | number[][] }> };
    const logits = r.outputs['logits']!.data as number[][];
    const correct = logits.filter((row, i) => row.indexOf(Math.max(...row)) === evalSet.y.data[i]).length;
    expect(Number(evals[2]![3])).toBeCloseTo(correct / 12, 4);
    expect(Math.abs(Number(evals[2]![2]) - (r.outputs['loss']!.data as number))).toBeLessThan(1e-4);
  });

  test('data that does not fit the model is a diagnostic listing its inputs', () => {
    fs.writeFileSync(at('extra.npz'), encodeNpz({ ...train, z: Tensor.zeros('float32', [40]) }));
    const extra = run('train', 'examples/mlp.tg', '--data', at('extra.npz'), ...REF, '--steps', '1');
    expect(extra.code).toBe(1);
    expect(extra.err).toContain(`${at('extra.npz')}: 'z' is not an input of the model`);
    expect(extra.err).toContain("the model's inputs (per micro-batch): x: f32[4,16], y: i32[4]");
    fs.writeFileSync(at('short.npz'), encodeNpz({ x: train.x, y: Tensor.zeros('int32', [39]) }));
    const short = run('train', 'examples/mlp.tg', '--data', at('short.npz'), ...REF, '--steps', '1');
    expect(short.code).toBe(1);
    expect(short.err).toContain('the arrays hold different numbers of samples');
    fs.writeFileSync(at('none.mjs'), 'export const answer = 42;\n');
    const none = run('train', 'examples/mlp.tg', '--data', at('none.mjs'), ...REF, '--steps', '1');
    expect(none.code).toBe(1);
    expect(none.err).toContain('the module exports no dataset');
    expect(run('train', 'examples/mlp.tg', '--data', at('missing.npz'), ...REF).code).toBe(2);
    expect(run('train', 'examples/mlp.tg', '--steps', '2', '--epochs', '1', ...REF).code).toBe(2);
    expect(run('train', 'examples/mlp.tg', '--data', at('train.npz'), '--samples', '9', ...REF).code).toBe(2);
  });
});

describe('checkpoints', () => {
  const common = ['examples/mlp.tg', '--data', at('train.npz'), '--optimizer', 'adam', '--lr', '0.01'];

  test('10 steps in one go = 5 steps, then --resume for the other 5, bit for bit (reference)', () => {
    ok(run('train', ...common, ...REF, '--steps', '10', '--save', at('straight.safetensors')));
    const first = ok(run('train', ...common, ...REF, '--steps', '5', '--checkpoint-dir', at('ck'), '--checkpoint-every', '2'));
    expect(first).toContain(`checkpoint written to ${at('ck', 'step-00000002')}`);
    expect(fs.readdirSync(at('ck')).sort()).toEqual(['step-00000002', 'step-00000004', 'step-00000005']);
    expect(fs.readdirSync(at('ck', 'step-00000005')).sort()).toEqual(['optimizer.safetensors', 'state.json', 'weights.safetensors']);
    const state = JSON.parse(fs.readFileSync(at('ck', 'step-00000005', 'state.json'), 'utf8'));
    expect(state).toMatchObject({ format: 1, model: 'mlp', step: 5, epoch: 0, runInEpoch: 5, seed: 0, shuffle: true, combinedBatchSize: 4, dataLength: 40 });
    // Adam's moments and step counter are kept with the weights
    const opt = loadWeights(at('ck', 'step-00000005', 'optimizer.safetensors'));
    expect(Object.keys(opt)).toContain('optimizer.step');
    expect(Object.keys(opt).length).toBeGreaterThan(4);
    const resumed = ok(run('train', ...common, ...REF, '--steps', '10', '--resume', at('ck'), '--save', at('resumed.safetensors')));
    expect(resumed).toContain(`resumed from ${at('ck', 'step-00000005')} at step 5`);
    expect(resumed).not.toMatch(/^step +[1-5]\/10/m);
    expect(bytes(at('resumed.safetensors')).equals(bytes(at('straight.safetensors')))).toBe(true);
    // across an epoch boundary, from an older checkpoint named directly
    ok(run('train', ...common, ...REF, '--steps', '14', '--save', at('straight14.safetensors')));
    ok(run('train', ...common, ...REF, '--steps', '14', '--resume', at('ck', 'step-00000004'), '--save', at('resumed14.safetensors')));
    expect(bytes(at('resumed14.safetensors')).equals(bytes(at('straight14.safetensors')))).toBe(true);
    expect(fs.readdirSync(at('ck')).filter((f) => f.startsWith('.'))).toEqual([]);
  });

  test('--resume with no checkpoint, or --load with --resume, is a command-line error', () => {
    expect(run('train', ...common, ...REF, '--resume', at('no-such')).code).toBe(2);
    fs.mkdirSync(at('empty'));
    const empty = run('train', ...common, ...REF, '--resume', at('empty'));
    expect(empty.code).toBe(2);
    expect(empty.err).toContain('no checkpoint in it');
    expect(run('train', ...common, ...REF, '--resume', at('ck'), '--load', at('straight.safetensors')).code).toBe(2);
  });

  test('a model with dropout resumes bit for bit: the checkpoint keeps the random-number state', () => {
    const model = at('dropout.tg');
    fs.writeFileSync(
      model,
      [
        'import "std/nn.tg"',
        'model mlp(batch: int = 4) {',
        '  input x: f32[batch, 16]',
        '  input y: i32[batch]',
        '  let (h, mask) = dropout(relu(linear(x, 16, 32) as fc1), ratio=0.5)',
        '  output logits = linear(h, 32, 10) as fc2',
        '  loss = cross_entropy(logits, y)',
        '}',
        '',
      ].join('\n'),
    );
    const base = [model, '--data', at('train.npz'), '--optimizer', 'adam', '--lr', '0.01'];
    for (const backend of [REF, ['--backend', 'ipu', '--no-progress']]) {
      const tag = backend[1]!;
      ok(run('train', ...base, ...backend, '--steps', '6', '--save', at(`drop-straight-${tag}.safetensors`)));
      ok(run('train', ...base, ...backend, '--steps', '3', '--checkpoint-dir', at(`drop-ck-${tag}`)));
      const state = JSON.parse(fs.readFileSync(at(`drop-ck-${tag}`, 'step-00000003', 'state.json'), 'utf8'));
      expect(state.rng).toEqual({ seed: 0, counter: 3 });
      const resumed = run('train', ...base, ...backend, '--steps', '6', '--resume', at(`drop-ck-${tag}`), '--save', at(`drop-resumed-${tag}.safetensors`));
      expect(resumed.code).toBe(0);
      expect(resumed.err).not.toContain('warning');
      expect(bytes(at(`drop-resumed-${tag}.safetensors`)).equals(bytes(at(`drop-straight-${tag}.safetensors`)))).toBe(true);
      // the masks matter: a resume that restarted the random stream would differ
      fs.writeFileSync(at(`drop-ck-${tag}`, 'step-00000003', 'state.json'), JSON.stringify({ ...state, rng: { seed: 0, counter: 0 } }));
      ok(run('train', ...base, ...backend, '--steps', '6', '--resume', at(`drop-ck-${tag}`), '--save', at(`drop-restarted-${tag}.safetensors`)));
      expect(bytes(at(`drop-restarted-${tag}.safetensors`)).equals(bytes(at(`drop-straight-${tag}.safetensors`)))).toBe(false);
    }
  }, 1_800_000);

  test('the compiled backend resumes bit for bit too', () => {
    const ipu = ['--backend', 'ipu', '--no-progress'];
    ok(run('train', ...common, ...ipu, '--steps', '4', '--save', at('ipu-straight.safetensors')));
    ok(run('train', ...common, ...ipu, '--steps', '2', '--checkpoint-dir', at('ipu-ck')));
    ok(run('train', ...common, ...ipu, '--steps', '4', '--resume', at('ipu-ck'), '--save', at('ipu-resumed.safetensors')));
    expect(bytes(at('ipu-resumed.safetensors')).equals(bytes(at('ipu-straight.safetensors')))).toBe(true);
  }, 1_800_000);
});

describe('weights in and out', () => {
  const rng = new Rng(5, 1);
  const values = (n: number) => Array.from({ length: n }, () => Math.fround(rng.normal() * 0.2));
  const init = { 'fc1.weight': values(32 * 16), 'fc1.bias': values(32), 'fc2.weight': values(10 * 32), 'fc2.bias': values(10) };
  const dims: Record<string, number[]> = { 'fc1.weight': [32, 16], 'fc1.bias': [32], 'fc2.weight': [10, 32], 'fc2.bias': [10] };
  // the MLP of examples/mlp.tg as an ONNX export: Gemm, Relu, Gemm, with a symbolic batch
  const onnxFile = at('mlp.onnx');
  fs.writeFileSync(
    onnxFile,
    onnxTesting.makeModel({
      nodes: [
        { op: 'Gemm', inputs: ['x', 'fc1.weight', 'fc1.bias'], outputs: ['h'], attrs: { transB: 1 } },
        { op: 'Relu', inputs: ['h'], outputs: ['r'] },
        { op: 'Gemm', inputs: ['r', 'fc2.weight', 'fc2.bias'], outputs: ['logits'], attrs: { transB: 1 } },
      ],
      inputs: [{ name: 'x', type: ONNX_DTYPE.FLOAT, shape: ['batch', 16] }],
      outputs: [{ name: 'logits', type: ONNX_DTYPE.FLOAT, shape: ['batch', 10] }],
      initializers: Object.entries(init).map(([k, v]) => onnxTesting.tensor(k, ONNX_DTYPE.FLOAT, dims[k]!, v)),
    }),
  );
  /** One step with a zero learning rate: the weights written are the weights loaded. */
  const loadedBy = (file: string) => {
    const out = at(`loaded-${path.basename(file)}.safetensors`);
    ok(run('train', 'examples/mlp.tg', '--load', file, '--steps', '1', '--lr', '0', ...REF, '--save', out));
    return loadWeights(out);
  };

  test('--load from safetensors and from an ONNX file', () => {
    ok(run('train', 'examples/mlp.tg', '--steps', '3', ...REF, '--save', at('start.safetensors')));
    const start = loadWeights(at('start.safetensors'));
    const got = loadedBy(at('start.safetensors'));
    for (const k of Object.keys(start)) expect(tensorsIdentical(got[k]!, start[k]!)).toBe(true);
    const fromOnnx = loadedBy(onnxFile);
    for (const [k, v] of Object.entries(init)) expect(Array.from(fromOnnx[k]!.data)).toEqual(v);
    // weights of another model are refused with what does not fit
    const bad = run('train', 'examples/mlp_tanh.tg', '--load', onnxFile, '--steps', '1', ...REF);
    expect(bad.code).toBe(1);
    expect(bad.err).toContain(`${onnxFile}: the weights do not fit the model`);
  });

  test('--save .onnx writes the trained weights into the ONNX model, which run loads back', () => {
    fs.writeFileSync(at('labelled.npz'), encodeNpz({ x: train.x, labels: train.y }));
    const trained = at('trained.onnx');
    const out = ok(run('train', onnxFile, '--loss', 'cross_entropy', '--batch-size', '4', '--data', at('labelled.npz'), '--steps', '5', ...REF, '--optimizer', 'adam', '--lr', '0.01', '--save', trained, '--checkpoint-dir', at('onnx-ck')));
    expect(out).toContain(`weights written to ${trained}`);
    const weights = at('onnx-ck', 'step-00000005', 'weights.safetensors');
    fs.writeFileSync(at('x.npy'), encodeNpy(evalSet.x));
    const outputs = (...args: string[]) => JSON.parse(ok(run('run', ...args, '--input', `x=${at('x.npy')}`, '--json'))).outputs;
    const fromOnnx = outputs(trained);
    expect(fromOnnx).toEqual(outputs(onnxFile, '--weights', weights));
    expect(fromOnnx).not.toEqual(outputs(onnxFile));
    // only an ONNX model can be saved as ONNX, and that is checked before training
    const notOnnx = run('train', 'examples/mlp.tg', ...REF, '--save', at('mlp-out.onnx'));
    expect(notOnnx.code).toBe(2);
    expect(notOnnx.err).toContain('is not one; save .safetensors or .json');
  });
});

describe('the synthetic task', () => {
  test('token inputs take values an embedding can read; labels come from the teacher', () => {
    const file = at('tok.tg');
    fs.writeFileSync(
      file,
      [
        'import "std/nn.tg"',
        'model tok(batch: int = 4, seq: int = 6, vocab: int = 11) {',
        '  input tokens: i32[batch, seq]',
        '  input flags: i32[batch]',
        '  input y: i32[batch]',
        '  param emb: f32[vocab, 8] = normal()',
        '  let pooled = reduce_mean(emb[tokens], axes=[1])',
        '  output logits = linear(pooled, 8, 3) as head',
        '  loss = cross_entropy(logits, y) + reduce_sum(cast(flags, to=f32)) * 0',
        '}',
      ].join('\n'),
    );
    const g = loadModel(file);
    const roles = inputRoles(g);
    expect([...roles.labels.keys()]).toEqual(['y']);
    expect(roles.labels.get('y')).toMatchObject({ classes: 3, logits: 'logits' });
    expect(Object.fromEntries(roles.tokens)).toEqual({ tokens: 11, flags: undefined });
    const data = new TeacherDataset(g, 200, 3, 0, 5);
    const all = data.batch(Array.from({ length: 200 }, (_, i) => i));
    const tokens = Array.from(all['tokens']!.data);
    expect(Math.min(...tokens)).toBe(0);
    expect(Math.max(...tokens)).toBe(10);
    expect(new Set(Array.from(all['flags']!.data))).toEqual(new Set([0, 1, 2, 3, 4]));
    expect(new Set(Array.from(all['y']!.data))).toEqual(new Set([0, 1, 2]));
    // the bag-of-tokens teacher is learnable: the loss falls
    const out = ok(run('train', file, '--steps', '150', ...REF, '--optimizer', 'adam', '--lr', '0.05'));
    const m = /loss ([0-9.]+) -> ([0-9.]+)/.exec(out)!;
    expect(Number(m[2])).toBeLessThan(0.7 * Number(m[1]));
  });
});

