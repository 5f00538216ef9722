import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runCli } from './support/cli.js';

/**
 * What a hostile or careless model file or command line meets: locations that name other files,
 * names that carry terminal escapes, training that diverges, paths that cannot be written.
 */

const run = (...args: string[]) => runCli(args, 120_000);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-hostile-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function mlpIr(): string {
  const r = run('ir', 'examples/mlp.tg', '--batch-size', '2');
  expect(r.code).toBe(0);
  return r.out;
}

describe('text IR locations', () => {
  // a pipeline whose stages run backwards: the error is reported at the reading op's own loc()
  const backwards = (locFile: string): string[] => {
    const text = mlpIr()
      .replaceAll('[scope = "fc1"]', '[scope = "fc1", block = "a", ipu = 1, stage = 1]')
      .replaceAll('[scope = "fc2"]', '[scope = "fc2", block = "b", ipu = 0, stage = 0]')
      .replace(/(%fc2\.y = matmul\(.*?\) \[.*?\] : f32\[2,10\])/, `$1 loc(${JSON.stringify(locFile)}:2:1)`);
    expect(text).toContain(`loc(${JSON.stringify(locFile)}:2:1)`);
    const f = path.join(tmp, `backwards-${path.basename(locFile)}.tgir`);
    fs.writeFileSync(f, text);
    const opts = path.join(tmp, 'pipelined.opts');
    fs.writeFileSync(opts, 'Training.gradientAccumulation(4)\nsetExecutionStrategy(PipelinedExecution(AutoStage.SameAsIpu))\n');
    return ['ir', f, '--pipeline', 'training', '--options', opts];
  };

  test('a loc() naming a file outside the model folder is printed as a location but never read', () => {
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-secret-'));
    const secret = path.join(outside, 'secret.txt');
    fs.writeFileSync(secret, 'line one\nTOP-SECRET-VALUE\n');
    const r = run(...backwards(secret));
    fs.rmSync(outside, { recursive: true, force: true });
    expect(r.code).toBe(1);
    expect(r.err).toContain(`${secret}:2:1: error: a value flows from stage 1`);
    expect(r.err).not.toContain('TOP-SECRET-VALUE');
  });

  test('a loc() naming a file in the model folder is printed but not read: only files the compilation opened are quoted', () => {
    const side = path.join(tmp, 'side.txt');
    fs.writeFileSync(side, 'first\nNOT-OPENED-LINE\n');
    const r = run(...backwards(side));
    expect(r.code).toBe(1);
    expect(r.err).toContain(`${side}:2:1: error: a value flows from stage 1`);
    expect(r.err).not.toContain('NOT-OPENED-LINE');
  });

  test('a loc() naming the .tgir file itself (which the compilation opened) is quoted with its line', () => {
    const placeholder = path.join(tmp, 'placeholder');
    const args = backwards(placeholder);
    const self = args[1]!;
    fs.writeFileSync(self, fs.readFileSync(self, 'utf8').replace(`loc(${JSON.stringify(placeholder)}:2:1)`, `loc(${JSON.stringify(self)}:2:1)`));
    const r = run(...args);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`${self}:2:1: error: a value flows from stage 1`);
    // line 2 of the text IR file is its first op
    const line2 = fs.readFileSync(self, 'utf8').split('\n')[1]!;
    expect(r.err).toContain(line2.trim().slice(0, 40));
  });
});

describe('names with terminal escapes', () => {
  test('escape sequences and bidirectional overrides in names are printed escaped, on stdout and stderr', () => {
    const text = mlpIr()
      .replace('graph @mlp', 'graph @"evil\\u001b[2J\\u001b]0;title\\u0007"')
      .replace('name = "x"', 'name = "x\\u001b[31m\\u202e"');
    const f = path.join(tmp, 'evil.tgir');
    fs.writeFileSync(f, text);
    const ok = run('run', f);
    expect(ok.code).toBe(0);
    expect(ok.out).toContain('evil\\u001b[2J\\u001b]0;title\\u0007');
    const missing = run('run', f, '--input', 'nope=x.json');
    expect(missing.code).toBe(2);
    for (const r of [ok, missing]) {
      expect(r.out + r.err).not.toMatch(/[\u001b\u0007\u202e]/);
    }
    expect(missing.err).toContain('x\\u001b[31m\\u202e');
  });
});

describe('training that diverges', () => {
  const args = ['train', 'examples/mlp.tg', '--steps', '5', '--batch-size', '4', '--backend', 'reference', '--lr', '1e30', '--no-progress'];
  test('a NaN loss is reported with its step; training goes on', () => {
    const r = run(...args);
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/warning: the loss is (NaN|Infinity|-Infinity) at step \d/);
    expect(r.err).toContain('--stop-on-nan');
  });
  test('--stop-on-nan stops at that step with exit code 1 and writes no weights', () => {
    const save = path.join(tmp, 'w.json');
    const r = run(...args, '--stop-on-nan', '--save', save);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/error: the loss is (NaN|Infinity|-Infinity) at step \d: training stopped \(--stop-on-nan\)/);
    expect(r.out).not.toMatch(/step 5\/5/);
    expect(fs.existsSync(save)).toBe(false);
  });
});

describe('paths and flags', () => {
  test('a missing or folder ONNX file is a command-line error (exit 2)', () => {
    expect(run('import', path.join(tmp, 'nothere.onnx')).code).toBe(2);
    const r = run('import', tmp);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/is a folder, not an ONNX model file/);
  });
  test('an output folder that cannot be written is refused before the build (exit 2)', () => {
    const r = run('compile', 'examples/mlp.tg', '-o', '/proc/mlp.tgexe');
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/the folder \/proc is not writable/);
  });
  test('--timeout must be a positive number; executableTimeout in an options file is checked', () => {
    expect(run('train', 'examples/mlp.tg', '--timeout', '0').code).toBe(2);
    const opts = path.join(tmp, 'bad.opts');
    fs.writeFileSync(opts, 'executableTimeout(-5)\n');
    const r = run('report', 'examples/mlp.tg', '--options', opts);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/executableTimeout.*positive number of seconds/);
  });
});

describe('damaged files', () => {
  test('thousands of errors on one long line give a short report: a few per line, lines shown around the column', () => {
    const text = mlpIr().replace('%h = relu(%fc1.y_1)', `%h = relu(%fc1.y_1 ${'x + '.repeat(20000)})`);
    const f = path.join(tmp, 'damaged.tgir');
    fs.writeFileSync(f, text);
    const r = run('ir', f);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/damaged\.tgir:\d+:\d+: error: /);
    expect(r.err.length).toBeLessThan(5000);
    for (const line of r.err.split('\n')) expect(line.length).toBeLessThan(200);
  });

  test('twenty thousand unclosed brackets in a model file are one nesting error', () => {
    const f = path.join(tmp, 'brackets.tg');
    fs.writeFileSync(f, fs.readFileSync('examples/mlp.tg', 'utf8').replace('output logits =', `output logits = f${'{"a":'.repeat(20000)}`));
    const r = run('ir', f, '--batch-size', '2');
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/brackets\.tg:\d+:\d+: error: this nests more than 100 levels deep/);
    expect(r.err.length).toBeLessThan(5000);
  });
});
