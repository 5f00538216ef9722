import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { runCli } from './support/cli.js';

/**
 * Output paths are checked before any work starts: an input of the same command, a folder, a
 * special file, `-`, or a missing folder is a command-line error (exit 2) that leaves every file
 * as it was; --emit-cpp writes only into a new, empty or tilegraph-made folder unless --force.
 */

const run = (...args: string[]) => runCli(args, 60_000);

describe('output paths', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-out-'));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
  const model = path.join(tmp, 'm.tg');
  fs.copyFileSync('examples/mlp.tg', model);
  const original = fs.readFileSync(model, 'utf8');

  test.each([
    [['compile', model, '-o', model], /-o .*m\.tg is an input of this command/],
    [['train', model, '--save', model, '--steps', '1', '--backend', 'reference'], /--save .*m\.tg is an input of this command/],
    [['compile', model, '-o', tmp], /is a folder; give a file name inside it/],
    [['compile', model, '-o', '-'], /writes to files only/],
    [['compile', model, '-o', path.join(tmp, 'no', 'such', 'x.tgx')], /the folder .* does not exist/],
  ])('%j is refused before any work', (args, message) => {
    const r = run(...(args as string[]));
    expect(r.code).toBe(2);
    expect(r.err).toMatch(message);
    expect(fs.readFileSync(model, 'utf8')).toBe(original);
    expect(fs.readdirSync(tmp).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  test('a FIFO is not replaced by a regular file', () => {
    const fifo = path.join(tmp, 'fifo');
    if (spawnSync('mkfifo', [fifo]).status !== 0) return; // no mkfifo here: nothing to check
    const r = run('import', 'examples/mlp.tg', '-o', fifo);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/is not a regular file/);
    expect(fs.statSync(fifo).isFIFO()).toBe(true);
  });

  test('--emit-cpp keeps a folder of other files unless --force', () => {
    const dir = path.join(tmp, 'mine');
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'keep me');
    const r = run('compile', model, '--emit-cpp', dir);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/holds other files \(notes\.txt\).*--force/);
    expect(fs.readdirSync(dir)).toEqual(['notes.txt']);
    expect(run('compile', model, '--emit-cpp', dir, '--force').code).toBe(0);
    expect(fs.readdirSync(dir).sort()).toEqual(['codelets.cpp', 'host.cpp', 'notes.txt', 'plan.json', 'tilegraph_host.cpp', 'tilegraph_host.hpp']);
    expect(fs.readFileSync(path.join(dir, 'notes.txt'), 'utf8')).toBe('keep me');
    // a folder tilegraph wrote can be written again
    const again = path.join(tmp, 'again');
    expect(run('compile', model, '--emit-cpp', again).code).toBe(0);
    expect(run('compile', model, '--emit-cpp', again).code).toBe(0);
  });

  test('--emit-cpp of a model with outlined layers writes host_layers.cpp, names every host unit in the SDK command, and writes the folder again', () => {
    const dir = path.join(tmp, 'layers');
    const bert = ['compile', 'examples/bert.tg', '--arg', 'layers=3', '--arg', 'ipus=1', '--arg', 'd_model=16', '--arg', 'heads=2', '--arg', 'ff=32', '--arg', 'seq=4', '--emit-cpp', dir];
    const first = run(...bert);
    expect(first.code).toBe(0);
    expect(fs.readdirSync(dir)).toContain('host_layers.cpp');
    const units = fs.readdirSync(dir).filter((f) => /^host.*\.cpp$/.test(f));
    expect(units).toEqual(expect.arrayContaining(['host.cpp', 'host_layers.cpp']));
    expect(/g\+\+ -std=c\+\+17 (.*) tilegraph_host\.cpp -o step/.exec(first.out)?.[1]?.split(' ').sort()).toEqual(units.sort());
    expect(run(...bert).code).toBe(0);
  });
});

describe('flag values', () => {
  test.each([
    ['--replicas', '0'],
    ['--accumulation', '-1'],
    ['--lr', 'abc'],
    ['--batch-size', 'abc'],
    ['--batch-size', '0'],
    ['--steps', '1.5'],
  ])('%s %s is a command-line error before any work (exit 2)', (flag, value) => {
    const r = run('train', 'examples/mlp.tg', flag, value, '--steps', '1', '--backend', 'reference');
    expect(r.code).toBe(2);
    expect(r.err).toMatch(new RegExp(`option '${flag} <[a-z]+>' argument '${value.replace('.', '\\.')}' is invalid`));
  });

  test('an impossible value in an options file names the file and line (exit 2)', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-flags-'));
    const file = path.join(dir, 'bad.opts');
    fs.writeFileSync(file, 'deviceIterations(2)\nreplicationFactor(0)\n');
    const r = run('train', 'examples/mlp.tg', '--options', file, '--steps', '1', '--backend', 'reference');
    fs.rmSync(dir, { recursive: true, force: true });
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/bad\.opts:2: replicationFactor: expected a positive integer, got 0/);
  });
});

describe('what a model file may read', () => {
  test('an import outside the model folder and the standard library is refused without reading it; --import-path allows a folder', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-imports-'));
    fs.mkdirSync(path.join(dir, 'proj'));
    fs.mkdirSync(path.join(dir, 'lib'));
    fs.writeFileSync(path.join(dir, 'lib', 'util.tg'), 'fn twice(x) {\n  return x + x\n}\n');
    fs.writeFileSync(path.join(dir, 'secret.txt'), 'the secret line\n');
    fs.writeFileSync(path.join(dir, 'proj', 'm.tg'), 'import "../lib/util.tg"\nmodel m() {\n  input x: f32[2]\n  output y = twice(x)\n}\n');
    fs.writeFileSync(path.join(dir, 'proj', 'evil.tg'), 'import "../secret.txt"\nimport "std/../../../../../../../../etc/passwd"\nmodel m() {\n  input x: f32[2]\n  output y = x\n}\n');
    const evil = run('ir', path.join(dir, 'proj', 'evil.tg'));
    expect(evil.code).toBe(1);
    expect(evil.err).toMatch(/import '\.\.\/secret\.txt' is outside the model's folder and the standard library; it is not read/);
    expect(evil.err).toMatch(/import 'std\/\.\.\/.*passwd' is outside/);
    expect(evil.err).not.toContain('the secret line');
    expect(evil.err).not.toContain('root:');
    expect(run('ir', path.join(dir, 'proj', 'm.tg')).code).toBe(1);
    const allowed = run('ir', path.join(dir, 'proj', 'm.tg'), '--import-path', path.join(dir, 'lib'));
    expect(allowed.code).toBe(0);
    expect(allowed.out).toContain('add(%x, %x)');
    fs.rmSync(dir, { recursive: true, force: true });
  });
});

describe('input paths', () => {
  test('a FIFO as the model or the options file is refused at once (no hang), a missing model is exit 2', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-inputs-'));
    const fifo = path.join(dir, 'fifo');
    const made = spawnSync('mkfifo', [fifo]).status === 0;
    if (made) {
      const asModel = run('ir', fifo);
      expect(asModel.code).toBe(2);
      expect(asModel.err).toMatch(/is not a regular file .* the model file/);
      const asOptions = run('train', 'examples/mlp.tg', '--options', fifo, '--steps', '1', '--backend', 'reference');
      expect(asOptions.code).toBe(2);
      expect(asOptions.err).toMatch(/is not a regular file .* the options file/);
    }
    const missing = run('train', path.join(dir, 'none.tg'), '--steps', '1', '--backend', 'reference');
    expect(missing.code).toBe(2);
    expect(missing.err).toMatch(/no such file: .*none\.tg \(the model file\)/);
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
