import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { ONNX_DTYPE, onnxTesting } from '@tilegraph/frontend';
import { ROOT, runCli } from './support/cli.js';

/**
 * What every command shares, as a user runs it: --model/--arg for model files with several models
 * or parameters, --dim wherever ONNX is opened, compile --loss, --json (one document; JSON Lines for
 * train; an error document when a command fails), colour only on a terminal (NO_COLOR and
 * FORCE_COLOR respected), and --no-progress hiding every bar.
 */

const CLI = path.join(ROOT, 'tools/dist/cli.js');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-conventions-'));
const at = (f: string) => path.join(tmp, f);
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const run = (...args: string[]) => runCli(args, 300_000);
/** The CLI with extra environment variables (colour). */
function runEnv(env: Record<string, string | undefined>, ...args: string[]) {
  const e = { ...process.env, ...env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete e[k];
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, encoding: 'utf8', env: e, timeout: 300_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}
function ok(r: { code: number | null; out: string; err: string }) {
  if (r.code !== 0) throw new Error(`exit ${r.code}\n${r.err}\n${r.out}`);
  return r;
}
const json = (r: { out: string }) => JSON.parse(r.out) as Record<string, unknown>;
const lines = (r: { out: string }) =>
  r.out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);

const TWO = at('two.tg');
fs.writeFileSync(
  TWO,
  [
    'import "std/nn.tg"',
    'model small(batch: int = 2) {',
    '  input x: f32[batch, 4]',
    '  output y = relu(x)',
    '}',
    'model classifier(batch: int = 4, hidden: int = 8) {',
    '  input x: f32[batch, 6]',
    '  input labels: i32[batch]',
    '  output logits = linear(relu(linear(x, 6, hidden) as fc1), hidden, 3) as fc2',
    '  loss = cross_entropy(logits, labels)',
    '}',
    '',
  ].join('\n'),
);

// an ONNX export with a symbolic batch and a symbolic sequence length, returning logits (no loss)
const SEQ = at('seq.onnx');
fs.writeFileSync(
  SEQ,
  onnxTesting.makeModel({
    nodes: [
      { op: 'ReduceMean', inputs: ['x'], outputs: ['pooled'], attrs: { axes: [1], keepdims: 0 } },
      { op: 'Gemm', inputs: ['pooled', 'w', 'b'], outputs: ['logits'], attrs: { transB: 1 } },
    ],
    inputs: [{ name: 'x', type: ONNX_DTYPE.FLOAT, shape: ['batch', 'seq', 4] }],
    outputs: [{ name: 'logits', type: ONNX_DTYPE.FLOAT, shape: ['batch', 3] }],
    initializers: [onnxTesting.tensor('w', ONNX_DTYPE.FLOAT, [3, 4], Array.from({ length: 12 }, (_, i) => (i - 6) / 10)), onnxTesting.tensor('b', ONNX_DTYPE.FLOAT, [3], [0.1, 0, -0.1])],
  }),
);

describe('--model, --arg and --dim on every command that opens a model', () => {
  test('a file with several models: each command asks which, and --model chooses', () => {
    const r = run('ir', TWO);
    expect(r.code).toBe(1);
    expect(r.err).toContain('declares several models (small, classifier)');
    expect(r.err).toContain('--model NAME');
    expect(ok(run('ir', TWO, '--model', 'small')).out).toContain('f32[2,4]');
    expect(ok(run('ir', TWO, '--model', 'classifier', '--arg', 'hidden=5', '--batch-size', '2')).out).toContain('f32[5,6]');
    const out = json(ok(run('run', TWO, '--model', 'classifier', '--arg', 'hidden=5', '--json')));
    expect(out['model']).toBe('classifier');
    expect((out['outputs'] as Record<string, { shape: number[] }>)['logits']!.shape).toEqual([4, 3]);
    ok(run('train', TWO, '--model', 'classifier', '--steps', '2', '--backend', 'reference'));
    ok(run('compile', TWO, '--model', 'classifier', '--emit-cpp', at('cls-cpp')));
    expect(fs.readdirSync(at('cls-cpp'))).toEqual(expect.arrayContaining(['host.cpp', 'codelets.cpp']));
    ok(run('report', TWO, '--model', 'classifier', '--json'));
    const missing = run('run', TWO, '--model', 'nope');
    // the command line names a model the file does not have: a command-line error
    expect(missing.code).toBe(2);
    expect(missing.err).toContain("no model is named 'nope' (models: small, classifier)");
  });

  test('--dim sizes the symbolic dimensions of an ONNX model in ir, run, compile and report', () => {
    const noDim = run('ir', SEQ, '--batch-size', '2');
    expect(noDim.code).toBe(1);
    expect(noDim.err).toContain("symbolic dimension 1 'seq'");
    expect(noDim.err).toContain('--dim name=size');
    expect(ok(run('ir', SEQ, '--batch-size', '2', '--dim', 'seq=5')).out).toContain('f32[2,5,4]');
    const out = json(ok(run('run', SEQ, '--batch-size', '2', '--dim', 'seq=5', '--json')));
    expect((out['outputs'] as Record<string, { shape: number[] }>)['logits']!.shape).toEqual([2, 3]);
    ok(run('compile', SEQ, '--batch-size', '2', '--dim', 'seq=5', '--pipeline', 'inference', '--emit-cpp', at('seq-cpp')));
    ok(run('report', SEQ, '--batch-size', '2', '--dim', 'seq=5', '--pipeline', 'inference'));
  });

  test('a flag that cannot apply to the kind of file says so (exit 2)', () => {
    const dimOnTg = run('ir', 'examples/mlp.tg', '--dim', 'seq=3');
    expect(dimOnTg.code).toBe(2);
    expect(dimOnTg.err).toContain('--dim sizes symbolic dimensions of an ONNX model');
    expect(dimOnTg.err).toContain('--arg name=value');
    const argOnOnnx = run('run', SEQ, '--batch-size', '2', '--dim', 'seq=5', '--arg', 'layers=2');
    expect(argOnOnnx.code).toBe(2);
    expect(argOnOnnx.err).toContain('--arg sets parameters of model-language (.tg) models');
    const modelOnOnnx = run('ir', SEQ, '--model', 'x');
    expect(modelOnOnnx.code).toBe(2);
    expect(modelOnOnnx.err).toContain('--model chooses among the models of a model-language (.tg) file');
    const badDim = run('ir', SEQ, '--dim', 'seq=0');
    expect(badDim.code).toBe(2);
    expect(badDim.err).toContain("--dim expects name=size with a positive integer size, got 'seq=0'");
  });
});

describe('compile --loss', () => {
  test('an ONNX export returning logits compiles for training with --loss, and without it says how', () => {
    const base = ['compile', SEQ, '--batch-size', '2', '--dim', 'seq=5'];
    const without = run(...base, '--emit-cpp', at('noloss'));
    expect(without.code).toBe(1);
    expect(without.err).toContain('the model has no loss');
    expect(without.err).toContain('--loss cross_entropy or --loss mse');
    expect(fs.existsSync(at('noloss'))).toBe(false);
    ok(run(...base, '--loss', 'cross_entropy', '--emit-cpp', at('ce')));
    // the training program holds the weight update: the labels input and the loss are in it
    const host = fs.readFileSync(at('ce/host.cpp'), 'utf8');
    expect(host).toContain('labels');
    const inference = run(...base, '--loss', 'mse', '--pipeline', 'inference', '--emit-cpp', at('inf'));
    expect(inference.code).toBe(2);
    expect(inference.err).toContain('--loss adds a loss for training');
  });
});

describe('--json', () => {
  test('each command prints one JSON document on stdout', () => {
    const ir = json(ok(run('ir', 'examples/mlp.tg', '--json', '--pipeline', 'training', '--print-ir-after', 'autograd', '--time-passes')));
    expect(ir['model']).toBe('mlp');
    expect((ir['dumps'] as string[])[0]).toContain('IR after autograd');
    expect((ir['timings'] as { pass: string }[]).map((t) => t.pass)).toContain('autograd');
    const imp = json(ok(run('import', SEQ, '--batch-size', '2', '--dim', 'seq=5', '--json')));
    expect(imp['inputs']).toEqual([{ name: 'x', dtype: 'float32', shape: [2, 5, 4] }]);
    expect(imp['op_counts']).toMatchObject({ reduce_mean: 1 });
    expect(Object.values(imp['op_counts'] as Record<string, number>).reduce((a, b) => a + b, 0)).toBe(imp['ops']);
    expect(imp).toMatchObject({ parameters: 2, weights: 15, outputs: [{ name: 'logits', dtype: 'float32', shape: [2, 3] }] });
    const comp = json(ok(run('compile', 'examples/mlp.tg', '--emit-cpp', at('mlp-cpp'), '--json')));
    expect(comp['emitted']).toEqual({ dir: at('mlp-cpp'), files: expect.arrayContaining(['host.cpp', 'codelets.cpp', 'plan.json']) });
    const rep = json(ok(run('report', 'examples/mlp.tg', '--json')));
    expect(rep['fits']).toBe(true);
    const ls = json(ok(run('cache', 'ls', '--dir', at('empty-cache'), '--json')));
    expect(ls).toMatchObject({ entries: [], total_bytes: 0 });
    for (const doc of [ir, imp, comp, rep, ls]) expect(doc['warnings']).toEqual([]);
  });

  test('train --json: JSON Lines, one event a line, from start to end', () => {
    const events = lines(ok(run('train', 'examples/mlp.tg', '--steps', '4', '--backend', 'reference', '--json')));
    expect(events.map((e) => e['event'])).toEqual(['start', 'compile', 'step', 'step', 'step', 'step', 'end']);
    expect(events[0]).toMatchObject({ model: 'mlp', steps: 4, optimizer: 'SGD', backend: 'reference' });
    const steps = events.filter((e) => e['event'] === 'step');
    expect(steps.map((e) => e['step'])).toEqual([1, 2, 3, 4]);
    for (const s of steps) expect(typeof s['loss']).toBe('number');
    expect(events.at(-1)).toMatchObject({ event: 'end', ok: true, steps: 4 });
  });

  test('a failing command still ends stdout with JSON: the exit code and the diagnostics', () => {
    const bad = at('bad.tg');
    fs.writeFileSync(bad, 'model m {\n  input x: f32[2]\n  output y = nosuchop(x)\n}\n');
    const doc = run('ir', bad, '--json');
    expect(doc.code).toBe(1);
    const d = json(doc);
    expect(d).toMatchObject({ ok: false, exit_code: 1 });
    const errors = d['errors'] as { message: string; location?: string }[];
    expect(errors[0]!.message).toContain('nosuchop');
    expect(errors[0]!.location).toBe(`${bad}:3:14`);
    expect(doc.err).toContain('nosuchop'); // and still on stderr for a person
    const usage = run('run', 'examples/mlp.tg', '--json', '--backend', 'gpu');
    expect(usage.code).toBe(2);
    expect(json(usage)).toMatchObject({ ok: false, exit_code: 2, errors: [{ severity: 'error', message: expect.stringContaining('--backend') }] });
    const train = run('train', bad, '--json');
    expect(train.code).toBe(1);
    const events = lines(train);
    expect(events[0]).toMatchObject({ event: 'error', message: expect.stringContaining('nosuchop') });
    expect(events.at(-1)).toEqual({ event: 'end', ok: false, exit_code: 1 });
  });
});

describe('colour', () => {
  const bad = at('colour.tg');
  fs.writeFileSync(bad, 'model m {\n  input x: f32[2]\n  output y = nosuchop(x)\n}\n');
  const ESC = '\u001b[';

  test('none when stderr is not a terminal, FORCE_COLOR turns it on, NO_COLOR wins', () => {
    const plain = runEnv({ FORCE_COLOR: undefined, NO_COLOR: undefined }, 'ir', bad);
    expect(plain.code).toBe(1);
    expect(plain.err).not.toContain(ESC);
    const forced = runEnv({ FORCE_COLOR: '1', NO_COLOR: undefined }, 'ir', bad);
    expect(forced.err).toContain(`${ESC}1;31merror:${ESC}0m`);
    // the text is the same once the colour is taken out
    expect(forced.err.replace(/\u001b\[[0-9;]*m/g, '')).toBe(plain.err);
    expect(runEnv({ FORCE_COLOR: '1', NO_COLOR: '1' }, 'ir', bad).err).not.toContain(ESC);
    expect(runEnv({ FORCE_COLOR: '0' }, 'ir', bad).err).not.toContain(ESC);
    // usage errors too
    expect(runEnv({ FORCE_COLOR: '1', NO_COLOR: undefined }, 'run', 'examples/mlp.tg', '--backend', 'gpu').err).toContain(ESC);
  });
});

/** A fresh cache folder holding only the emulation library of the suite's cache, so models are really built. */
function seededCache(name: string): string {
  const cache = at(name);
  fs.mkdirSync(path.join(cache, 'tilegraph'), { recursive: true, mode: 0o700 });
  const shared = path.join(process.env['XDG_CACHE_HOME'] ?? path.join(os.homedir(), '.cache'), 'tilegraph');
  for (const e of fs.existsSync(shared) ? fs.readdirSync(shared) : []) {
    if (e.startsWith('poplar-host-') || e.startsWith('tilegraph-host-')) fs.cpSync(path.join(shared, e), path.join(cache, 'tilegraph', e), { recursive: true, preserveTimestamps: true });
  }
  return cache;
}

describe('the executable cache on the compile line', () => {
  test('hit or miss, and with --explain-cache why not', () => {
    const env = { XDG_CACHE_HOME: seededCache('explain-cache') };
    const train = (...extra: string[]) => ok(runEnv(env, 'train', TWO, '--model', 'classifier', '--steps', '1', ...extra));
    expect(train('--arg', 'hidden=11', '--explain-cache').out).toMatch(/compiled in [\d.]+ s, built \(not in the executable cache: no build of 'classifier' is in the cache/);
    expect(train('--arg', 'hidden=11').out).toMatch(/compiled in [\d.]+ s, from the executable cache\n/);
    const other = train('--arg', 'hidden=12', '--explain-cache').out;
    expect(other).toContain("the cached build of 'classifier' differs in host.cpp, the host program");
    // without --explain-cache the line only says it was built
    expect(train('--arg', 'hidden=13').out).toMatch(/compiled in [\d.]+ s, built \(not in the executable cache\)\n/);
    const events = lines(train('--arg', 'hidden=12', '--json'));
    expect(events.find((e) => e['event'] === 'compile')).toMatchObject({ cache: 'hit' });
    const doc = json(ok(runEnv(env, 'compile', TWO, '--model', 'classifier', '--arg', 'hidden=14', '-o', at('c14.tgx'), '--json')));
    expect(doc['executable']).toMatchObject({ file: at('c14.tgx'), cache: 'miss', cache_reason: expect.stringContaining("the last used of the 3 cached builds of 'classifier' differs in host.cpp") });
  });
});

const hasScript = fs.existsSync('/usr/bin/script');
const onTerminal = hasScript ? describe : describe.skip;
if (!hasScript) console.warn('test/cli-conventions.test.ts: the terminal tests are skipped: /usr/bin/script (util-linux) is missing');

onTerminal('progress bars, on a terminal', () => {
  /** Runs the command in a pseudo-terminal (util-linux `script`): what a person at a terminal sees. */
  function onTty(args: readonly string[], env: Record<string, string> = {}) {
    const quoted = [process.execPath, CLI, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    const r = spawnSync('script', ['-qefc', quoted, '/dev/null'], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1', ...env }, timeout: 300_000 });
    return { code: r.status, text: r.stdout };
  }
  const BAR = /[\u2588\u2591]/; // the bar's full and empty cells

  test('a bar while training on a terminal; --no-progress hides it and keeps the step lines', () => {
    const withBar = onTty(['train', 'examples/mlp.tg', '--steps', '20', '--backend', 'reference']);
    expect(withBar.code).toBe(0);
    expect(withBar.text).toMatch(BAR);
    const without = onTty(['train', 'examples/mlp.tg', '--steps', '20', '--backend', 'reference', '--no-progress']);
    expect(without.code).toBe(0);
    expect(without.text).not.toMatch(BAR);
    expect(without.text).toContain('step 20/20');
  });

  test('--no-progress hides the build bars too', () => {
    const cache = seededCache('bars-cache');
    const args = ['train', TWO, '--model', 'classifier', '--arg', 'hidden=7', '--steps', '2', '--no-progress'];
    const quiet = onTty(args, { XDG_CACHE_HOME: cache });
    expect(quiet.code).toBe(0);
    expect(quiet.text).not.toMatch(BAR);
    const loud = onTty(['train', TWO, '--model', 'classifier', '--arg', 'hidden=9', '--steps', '2'], { XDG_CACHE_HOME: cache });
    expect(loud.code).toBe(0);
    expect(loud.text).toMatch(/compiling +\[[\u2588\u2591]+\] \d+% \| \d+\/\d+ jobs/);
    // the training bar has the same style
    expect(loud.text).toMatch(/training +\[[\u2588\u2591]+\] \d+% \| \d+\/2 steps/);
  });
});
