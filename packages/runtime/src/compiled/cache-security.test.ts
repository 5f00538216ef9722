import { jest } from '@jest/globals';
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { generatePoplar } from '@tilegraph/codegen-poplar';
import { Options } from '@tilegraph/frontend';
import { DiagnosticError, GraphBuilder, Module, collectVariables, execute, repeat, seq, streamIn } from '@tilegraph/ir';
import { ModuleInterpreter } from '../reference/module.js';
import { compileAndExport, loadExecutable } from './archive.js';
import { CompiledBackend, ExecutableImage, compileOptionsFrom, initialState } from './backend.js';
import { BuiltExecutable, buildExecutable } from './build.js';
import { listCache } from './cache.js';
import { compareOutputs, randomTensor, seedLibraries } from './testing.js';

/**
 * What the executable cache refuses to use: planted or damaged executables, a damaged emulation
 * library, altered exported files, and cache folders others can write into. Real builds, in a
 * cache folder of this file's own.
 */

jest.setTimeout(30 * 60 * 1000);

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-cache-security-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
const cacheDir = path.join(tmp, 'cache');
const marker = path.join(tmp, 'planted-program-ran');
const planted = `#!/bin/sh\ntouch ${marker}\n`;

function smallModule(op = 'sigmoid'): Module {
  const b = new GraphBuilder('forward');
  const x = b.input('x', 'float32', [3, 4]);
  const w = b.parameter('w', 'float32', [4, 4], { kind: 'init', fn: 'normal', args: { seed: 9 } });
  b.output('y', b.op(op, [b.op('matmul', [x, w])]));
  const graphs = new Map([['forward', b.graph]]);
  return { name: `small-${op}`, graphs, program: repeat(2, seq(streamIn(['x']), execute('forward'))), replicationFactor: 1, variables: collectVariables(graphs) };
}

const feed = { x: [randomTensor('float32', [3, 4], 1), randomTensor('float32', [3, 4], 2)] };

/** Runs a step and compares with the reference. */
function runs(image: ExecutableImage, m: Module): void {
  const backend = new CompiledBackend(image);
  try {
    expect(compareOutputs(backend.run(feed), new ModuleInterpreter(m).run(feed))).toEqual([]);
  } finally {
    backend.dispose();
  }
}

const m = smallModule();
const sources = generatePoplar(m);
let built: BuiltExecutable;
let exported: string;

beforeAll(() => {
  seedLibraries(cacheDir);
  built = buildExecutable(sources, { cacheDir, showProgress: false });
  exported = path.join(tmp, 'small.tgexe');
  compileAndExport(m, exported, { cacheDir, showProgress: false });
});

describe('cached executables', () => {
  test('a planted step is refused, reported and rebuilt; it never runs', () => {
    fs.writeFileSync(built.executable, planted);
    const warnings: string[] = [];
    const again = buildExecutable(sources, { cacheDir, showProgress: false, warn: (w) => warnings.push(w) });
    expect(again.cached).toBe(false);
    expect(again.dir).toBe(built.dir);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(`the cached executable ${built.dir} is not used: step has ${planted.length} bytes`);
    runs({ ...again, initial: initialState(m) }, m);
    const third = buildExecutable(sources, { cacheDir, showProgress: false, warn: (w) => warnings.push(w) });
    expect(third.cached).toBe(true);
    expect(warnings).toHaveLength(1);
    expect(fs.existsSync(marker)).toBe(false);
  });

  test('a cache folder others can write into is refused before any build', () => {
    const open = path.join(tmp, 'open-cache');
    fs.mkdirSync(open);
    fs.chmodSync(open, 0o777);
    const opts = compileOptionsFrom(new Options().enableExecutableCaching(open));
    expect(() => buildExecutable(sources, { ...opts, showProgress: false })).toThrow(DiagnosticError);
    expect(() => buildExecutable(sources, { ...opts, showProgress: false })).toThrow(/executable cache .*open-cache can be written by other users \(mode 777\)/);
    expect(() => loadExecutable(exported, { cacheDir: open })).toThrow(/can be written by other users/);
    expect(fs.readdirSync(open)).toEqual([]);
  });

  test('the executable dies with the process that started it', async () => {
    const dist = fileURLToPath(new URL('../../dist/index.js', import.meta.url));
    const script = path.join(tmp, 'start.mjs');
    fs.writeFileSync(script, `import { loadExecutable } from ${JSON.stringify(dist)};\nloadExecutable(process.argv[2], { cacheDir: process.argv[3] }).backend();\nconsole.log('ready');\nsetInterval(() => {}, 1000);\n`);
    const child = spawn(process.execPath, [script, exported, cacheDir], { stdio: ['ignore', 'pipe', 'pipe'] });
    const steps = () => spawnSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' }).stdout.split('\n').filter((l) => l.includes(`${cacheDir}/loaded-`));
    try {
      let out = '';
      let err = '';
      child.stdout.on('data', (d) => (out += d));
      child.stderr.on('data', (d) => (err += d));
      for (let i = 0; i < 600 && !out.includes('ready') && child.exitCode === null; i++) await new Promise((r) => setTimeout(r, 100));
      expect(err).toBe('');
      expect(out).toContain('ready');
      expect(steps()).toHaveLength(1);
      child.kill('SIGTERM');
      for (let i = 0; i < 50 && steps().length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    } finally {
      child.kill('SIGKILL');
    }
    expect(steps()).toEqual([]);
  });
});

describe('exported executables', () => {
  const bytes = () => fs.readFileSync(exported);
  const write = (name: string, b: Buffer) => {
    const f = path.join(tmp, name);
    fs.writeFileSync(f, b);
    return f;
  };
  /** A file with a valid checksum around the given header and blobs. */
  const forge = (header: object, blobs: Buffer) => {
    const head = Buffer.from(JSON.stringify(header));
    const len = Buffer.alloc(4);
    len.writeUInt32LE(head.length);
    const body = Buffer.concat([len, head, blobs]);
    return Buffer.concat([Buffer.from('TGEXE003'), createHash('sha256').update(body).digest(), body]);
  };

  test('an altered, truncated, older, newer or inconsistent file is refused with a diagnostic', () => {
    const good = bytes();
    expect(good.subarray(0, 8).toString()).toBe('TGEXE004');
    // a byte of the executable (the blobs come first), then one of the header (last)
    const flipped = Buffer.from(good);
    flipped[100] ^= 1;
    expect(() => loadExecutable(write('flipped.tgexe', flipped), { cacheDir })).toThrow(/checksum does not match: the file is damaged or was altered/);
    const header = Buffer.from(good);
    header[header.length - 100] ^= 0x40;
    expect(() => loadExecutable(write('header.tgexe', header), { cacheDir })).toThrow(/checksum does not match/);
    expect(() => loadExecutable(write('short.tgexe', good.subarray(0, good.length - 10)), { cacheDir })).toThrow(/truncated header/);
    const older = Buffer.from(good);
    older.write('TGEXE001', 0);
    expect(() => loadExecutable(write('older.tgexe', older), { cacheDir })).toThrow(/format 1, written by an older tilegraph[^]*re-export it with this version/);
    const newer = Buffer.from(good);
    newer.write('TGEXE005', 0);
    expect(() => loadExecutable(write('newer.tgexe', newer), { cacheDir })).toThrow(/format 5, written by a newer tilegraph/);
    const plan = built.plan;
    expect(() => loadExecutable(write('name.tgexe', forge({ format: 3, plan, files: [{ name: '../../bin/sh', offset: 0, size: 1 }], state: [] }, Buffer.from('x'))), { cacheDir })).toThrow(
      /unexpected file "..\/..\/bin\/sh"/,
    );
    expect(() => loadExecutable(write('outside.tgexe', forge({ format: 3, plan, files: [{ name: 'step', offset: 0, size: 100 }], state: [] }, Buffer.from('x'))), { cacheDir })).toThrow(
      /a blob lies outside the file/,
    );
    expect(() => loadExecutable(write('twice.tgexe', forge({ format: 3, plan, files: [{ name: 'step', offset: 0, size: 1 }, { name: 'step', offset: 0, size: 1 }], state: [] }, Buffer.from('x'))), { cacheDir })).toThrow(
      /file 'step' appears twice/,
    );
    expect(() => loadExecutable(write('format.tgexe', forge({ format: 7, plan, files: [], state: [] }, Buffer.alloc(0))), { cacheDir })).toThrow(/header format 7/);
    expect(fs.existsSync(marker)).toBe(false);
  });

  test('a planted step in the unpacked entry is refused and unpacked again from the file', () => {
    const loaded = loadExecutable(exported, { cacheDir });
    const original = fs.readFileSync(loaded.image.executable);
    fs.writeFileSync(loaded.image.executable, planted);
    const warnings: string[] = [];
    const again = loadExecutable(exported, { cacheDir, warn: (w) => warnings.push(w) });
    expect(again.image.dir).toBe(loaded.image.dir);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/the cached unpacked executable .*loaded-[0-9a-f]+ is not used/);
    expect(fs.readFileSync(again.image.executable).equals(original)).toBe(true);
    runs(again.image, m);
    expect(fs.existsSync(marker)).toBe(false);
  });
});

describe('the emulation library', () => {
  test('a truncated libpoplar_host.a is rebuilt before the next link; pruning keeps the new entry and the libraries', () => {
    const lib = listCache(cacheDir).find((e) => e.kind === 'library' && e.name.startsWith('poplar-host-'))!;
    expect(lib.valid).toBe(true);
    const archive = path.join(lib.dir, 'lib', 'libpoplar_host.a');
    fs.truncateSync(archive, Math.floor(fs.statSync(archive).size / 2));
    const warnings: string[] = [];
    const other = smallModule('tanh');
    const saved = process.env['TILEGRAPH_CACHE_MAX_BYTES'];
    process.env['TILEGRAPH_CACHE_MAX_BYTES'] = '1';
    let b: BuiltExecutable;
    try {
      b = buildExecutable(generatePoplar(other), { cacheDir, showProgress: false, warn: (w) => warnings.push(w) });
    } finally {
      if (saved === undefined) delete process.env['TILEGRAPH_CACHE_MAX_BYTES'];
      else process.env['TILEGRAPH_CACHE_MAX_BYTES'] = saved;
    }
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/the cached Poplar emulation library .*poplar-host-[\w-]+ is not used: lib\/libpoplar_host.a has \d+ bytes, its manifest says \d+/);
    // over the cap: everything else went, least recently used first
    const after = listCache(cacheDir);
    // (and the host support library and the two compiled objects the build linked)
    expect(after.filter((e) => !e.name.startsWith('tilegraph-host-') && e.kind !== 'object').map((e) => [e.name, e.valid]).sort()).toEqual([
      [path.basename(b.dir), true],
      [lib.name, true],
    ]);
    expect(after.filter((e) => e.kind === 'object').map((e) => [e.name.replace(/-[0-9a-f]+$/, ''), e.valid]).sort()).toEqual([
      ['obj-codelets_registry', true],
      ['obj-host', true],
    ]);
    expect(after.filter((e) => e.name.startsWith('tilegraph-host-')).map((e) => e.valid)).toEqual([true]);
    runs({ ...b, initial: initialState(other) }, other);
  });
});
