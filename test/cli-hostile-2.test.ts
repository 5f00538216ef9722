import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import { ONNX_DTYPE, encodeModel, onnxTesting } from '@tilegraph/frontend';
import { listCache, resolveCacheDir } from '../packages/runtime/src/compiled/cache.js';
import { ROOT, runCli } from './support/cli.js';

/**
 * More of what a hostile user tries (the second audit): options files nested past the parsers'
 * limit, FIFOs and /proc files where the command reads its inputs, a .tgir whose loc() names other
 * files, output folders that cannot be made, and the exit code of each mistake on the command line
 * (2: the command line or a path it names is wrong), said before any work.
 */

const run = (...args: string[]) => runCli(args, 90_000);
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-hostile2-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function file(name: string, text: string | Uint8Array): string {
  const f = path.join(tmp, name);
  fs.mkdirSync(path.dirname(f), { recursive: true });
  fs.writeFileSync(f, text);
  return f;
}

/** Makes a FIFO; false where there is no mkfifo (nothing to check there). */
function fifo(p: string): boolean {
  fs.mkdirSync(path.dirname(p), { recursive: true });
  return spawnSync('mkfifo', [p]).status === 0;
}

/** Exit 2 with `message`, and no internal error. */
function expectUsage(r: { code: number | null; err: string; out: string }, message: RegExp | string): void {
  expect({ code: r.code, err: r.err.slice(0, 1500) }).toEqual({ code: 2, err: typeof message === 'string' ? expect.stringContaining(message) : expect.stringMatching(message) });
  expect(r.err).not.toContain('internal error');
}

const MLP = 'examples/mlp.tg';
const ENVIRON_SECRET = 'TG_AUDIT_SECRET_VALUE';

describe('options files nested past the limit', () => {
  test.each([
    ['5,000 nested parentheses', `deviceIterations(${'('.repeat(5000)}1${')'.repeat(5000)})`, 117],
    ['10,000 nested brackets', `deviceIterations(${'['.repeat(10_000)}1${']'.repeat(10_000)})`, 117],
    ['10,000 nested PipelinedExecution(', `setExecutionStrategy(${'PipelinedExecution('.repeat(10_000)}${')'.repeat(10_001)}`, 21 + 19 * 100],
  ])('%s: exit 2 at file:line:col, no stack overflow', (_what, line, col) => {
    const f = file('deep.opts', `# deep\n${line}\n`);
    const r = run('report', MLP, '--options', f);
    expectUsage(r, `deep.opts:2:${col}: this nests more than 100 levels deep`);
    expect(r.err.length).toBeLessThan(2000);
  });
});

describe('inputs that are not regular files, or are the system state', () => {
  test('a FIFO in a checkpoint folder is refused at once (exit 2), not read', () => {
    const ck = path.join(tmp, 'ck');
    if (!fifo(path.join(ck, 'state.json'))) return;
    const r = run('train', MLP, '--resume', ck, '--steps', '1', '--backend', 'reference');
    expectUsage(r, /ck\/state\.json is not a regular file \(a FIFO\)/);
    expect(r.out).not.toContain('training');
    // a good state.json with a FIFO for the weights: the same
    const ck2 = path.join(tmp, 'ck2');
    if (!fifo(path.join(ck2, 'weights.safetensors'))) return;
    file('ck2/state.json', '{}');
    file('ck2/optimizer.safetensors', '');
    expectUsage(run('train', MLP, '--resume', ck2, '--steps', '1', '--backend', 'reference'), /weights\.safetensors is not a regular file \(a FIFO\)/);
  });

  test('a FIFO among the .npy files of a --data folder is refused (exit 2)', () => {
    const data = path.join(tmp, 'data');
    if (!fifo(path.join(data, 'x.npy'))) return;
    expectUsage(run('train', MLP, '--data', data, '--steps', '1', '--backend', 'reference'), /x\.npy is not a regular file \(a FIFO\)/);
  });

  test('a FIFO as ONNX external data is refused without blocking', () => {
    const T = onnxTesting;
    const dir = path.join(tmp, 'onnx-ext');
    if (!fifo(path.join(dir, 'w.bin'))) return;
    const proto = T.modelProto({ nodes: [{ op: 'Relu', inputs: ['w'], outputs: ['y'] }], inputs: [], outputs: [{ name: 'y', type: ONNX_DTYPE.FLOAT }] });
    proto.graph!.initializer = [{ name: 'w', dataType: ONNX_DTYPE.FLOAT, dims: [2], dataLocation: 1, externalData: [{ key: 'location', value: 'w.bin' }] }];
    const bytes = encodeModel(proto);
    const m = file('onnx-ext/m.onnx', bytes);
    const r = run('ir', m);
    // the model's content is wrong (its initializer points at a FIFO): exit 1 at the initializer
    expect(r.code).toBe(1);
    expect(r.err).toContain("external data location 'w.bin' is refused: it is not a regular file");
  });

  test('/proc files are refused as the model, through a link, as options or data, and as an import', () => {
    const env = { ...process.env, [ENVIRON_SECRET]: 'leaked' };
    const cli = (...args: string[]) => {
      const r = spawnSync(process.execPath, [path.join(ROOT, 'tools/dist/cli.js'), ...args], { cwd: ROOT, encoding: 'utf8', timeout: 60_000, env });
      return { code: r.status, out: r.stdout, err: r.stderr };
    };
    const link = path.join(tmp, 'env.tg');
    fs.symlinkSync('/proc/self/environ', link);
    for (const r of [cli('ir', '/proc/self/environ'), cli('ir', link)]) {
      expectUsage(r, /is under \/proc, the system's state rather than a file \(the model file\)/);
      expect(r.out + r.err).not.toContain(ENVIRON_SECRET);
    }
    const optsLink = path.join(tmp, 'env.opts');
    fs.symlinkSync('/proc/self/environ', optsLink);
    expectUsage(cli('report', MLP, '--options', optsLink), /env\.opts is not read: its real path \/proc\/\d+\/environ is under \/proc/);
    const dataLink = path.join(tmp, 'env.npy');
    fs.symlinkSync('/proc/self/environ', dataLink);
    expectUsage(cli('train', MLP, '--data', dataLink, '--steps', '1', '--backend', 'reference'), /env\.npy is not read: .* is under \/proc/);

    // an import allowed by --import-path, and the diagnostic names the real path, not one glued onto the model's folder
    const model = file('p2/a/b/m.tg', 'import "/proc/self/environ"\nmodel m {\n  input x: f32[2]\n  output y = x\n}\n');
    const r = cli('ir', model, '--import-path', '/proc/self');
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/m\.tg:1:8: error: cannot import '\/proc\/self\/environ': its real path \/proc\/\d+\/environ is under \/proc/);
    expect(r.err).not.toContain('a/b/proc');
    expect(r.out + r.err).not.toContain(ENVIRON_SECRET);
  });
});

describe('output folders that cannot be made', () => {
  // A read-only mount (EROFS) cannot be made portably in a test, nor a permission failure as root:
  // a parent that is a regular file fails mkdir the same way (before: ENOENT/ENOTDIR, exit 70).
  test('--emit-cpp under a regular file: exit 2 naming the folder, before the work', () => {
    const plain = file('plain', 'not a folder');
    const r = run('compile', MLP, '--emit-cpp', path.join(plain, 'sub', 'cpp'));
    expectUsage(r, `${plain} is not a folder, so the folder cannot be made`);
    expect(r.out).toBe('');
  });

  test('--emit-cpp under a folder without write permission (not as root): exit 2', () => {
    if (typeof process.getuid === 'function' && process.getuid() === 0) return; // root writes anywhere
    const ro = path.join(tmp, 'ro');
    fs.mkdirSync(ro);
    fs.chmodSync(ro, 0o555);
    try {
      expectUsage(run('compile', MLP, '--emit-cpp', path.join(ro, 'a', 'cpp')), /the folder .*ro is not writable, so the folder cannot be made there/);
    } finally {
      fs.chmodSync(ro, 0o755);
    }
  });
});

describe('command-line mistakes are exit 2, before any work', () => {
  test('cache ls --dir FILE', () => {
    expectUsage(run('cache', 'ls', '--dir', file('cachefile', 'x')), /the executable cache .*cachefile is not a folder/);
  });

  test('TILEGRAPH_CACHE_MAX_BYTES=abc is said before training starts', () => {
    const r = spawnSync(process.execPath, [path.join(ROOT, 'tools/dist/cli.js'), 'train', MLP, '--steps', '1', '--backend', 'reference'], { cwd: ROOT, encoding: 'utf8', timeout: 60_000, env: { ...process.env, TILEGRAPH_CACHE_MAX_BYTES: 'abc' } });
    expectUsage({ code: r.status, out: r.stdout, err: r.stderr }, "TILEGRAPH_CACHE_MAX_BYTES: expected a size in bytes (e.g. 500M, 2G), got 'abc'");
    expect(r.stdout).not.toContain('training');
  });

  test('a cache folder others can write into, or another user owns, is refused before the build', () => {
    const open = path.join(tmp, 'opencache');
    fs.mkdirSync(open);
    fs.chmodSync(open, 0o777);
    const opts = file('opencache.opts', `enableExecutableCaching(${JSON.stringify(open)})\n`);
    const r = run('train', MLP, '--options', opts, '--steps', '1', '--no-progress');
    expectUsage(r, `the executable cache ${open} can be written by other users (mode 777)`);
    expect(r.out).not.toContain('training');
    // only root can give a folder to another user
    if (typeof process.getuid === 'function' && process.getuid() === 0) {
      const theirs = path.join(tmp, 'theirs');
      fs.mkdirSync(theirs, { mode: 0o700 });
      fs.chownSync(theirs, 65534, 65534);
      expectUsage(run('cache', 'ls', '--dir', theirs), `the executable cache ${theirs} belongs to another user (uid 65534)`);
    }
  });

  test.each([
    [['train', MLP, '--lr', '-1', '--steps', '1', '--backend', 'reference'], '--lr -1: SGD: lr must be >= 0'],
    [['ir', MLP, '--pipeline', 'training', '--print-ir-after', 'foo'], "--print-ir-after: no pass named 'foo'"],
    [['run', MLP, '--model', 'nope'], "--model nope: examples/mlp.tg: no model is named 'nope' (models: mlp)"],
    [['ir', 'README.md'], 'cannot tell the kind of model from the extension of README.md'],
  ])('%j', (args, message) => {
    const r = run(...(args as string[]));
    expectUsage(r, message);
    expect(r.out).toBe('');
  });
});

describe('outputs that are inputs', () => {
  test('import m.onnx -o m.onnx and train m.onnx --save m.onnx are refused, the input unchanged', () => {
    const T = onnxTesting;
    const m = file('same.onnx', T.makeModel({ nodes: [{ op: 'Relu', inputs: ['x'], outputs: ['y'] }], inputs: [{ name: 'x', type: ONNX_DTYPE.FLOAT, shape: [2, 3] }], outputs: [{ name: 'y', type: ONNX_DTYPE.FLOAT }] }));
    const before = fs.readFileSync(m);
    expectUsage(run('import', m, '-o', m), /is an input of this command/);
    expectUsage(run('train', m, '--save', m, '--steps', '1', '--backend', 'reference'), /--save .*same\.onnx is an input of this command/);
    expect(fs.readFileSync(m).equals(before)).toBe(true);
  });
});

describe('a planted executable in the cache', () => {
  // through the CLI as a user meets it (the runtime's unit test, cache-security.test.ts, plants one
  // through the API): a small model of its own, so no other test's entry is touched, and its build is
  // kept in the suite's cache, so a later run builds once (the rebuild after the planting)
  test('train meets a modified cached step: refused with a warning, rebuilt, never run', () => {
    const model = file('planted/planted.tg', 'import "std/nn.tg"\n\nmodel planted_step(batch: int = 2) {\n  input x: f32[batch, 3]\n  input y: i32[batch]\n  output logits = linear(x, 3, 2) as fc\n  loss = cross_entropy(logits, y)\n}\n');
    const train = () => runCli(['train', model, '--steps', '1', '--no-progress', '--explain-cache'], 300_000);
    const first = train();
    expect({ code: first.code, err: first.err.slice(0, 1000) }).toEqual({ code: 0, err: expect.any(String) });
    // the entry this training used (the suite's cache may hold builds of earlier versions of the code)
    const entries = listCache(resolveCacheDir(), { verify: false })
      .filter((e) => e.kind === 'executable' && e.module === 'planted_step')
      .sort((a, b) => b.lastUsed.getTime() - a.lastUsed.getTime())
      .slice(0, 1);
    expect(entries.length).toBe(1);
    const marker = path.join(tmp, 'planted-program-ran');
    const planted = `#!/bin/sh\ntouch ${marker}\n`;
    for (const e of entries) fs.writeFileSync(path.join(e.dir, 'step'), planted, { mode: 0o700 });
    const second = train();
    expect(second.code).toBe(0);
    expect(second.err).toMatch(/the cached executable .* is not used: step has \d+ bytes/);
    expect(second.out).toMatch(/built \(not in the executable cache/);
    expect(second.out).toMatch(/step 1\/1 {2}loss \d/);
    expect(fs.existsSync(marker)).toBe(false);
    for (const e of entries) if (fs.existsSync(path.join(e.dir, 'step'))) expect(fs.readFileSync(path.join(e.dir, 'step'), 'utf8')).not.toBe(planted);
  });
});

describe('devices as outputs, and a step that does not answer', () => {
  test('-o /dev/null and -o /proc/self/fd/1 are refused before the work; /dev/null stays a device', () => {
    expectUsage(run('compile', MLP, '-o', '/dev/null'), /-o \/dev\/null is not a regular file/);
    expect(fs.statSync('/dev/null').isCharacterDevice()).toBe(true);
    const r = run('compile', MLP, '-o', '/proc/self/fd/1');
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
  });

  test('train --timeout: an executable that does not answer in time is stopped with a diagnostic naming the option', () => {
    // a millisecond is less than any executable needs to load the weights
    const r = run('train', MLP, '--timeout', '0.001', '--steps', '2', '--no-progress');
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/did not answer within 0\.001 s and was stopped/);
    expect(r.err).toContain('--timeout <seconds>');
  });
});
