import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { generatePoplar } from '@tilegraph/codegen-poplar';
import type { GeneratedSources } from '@tilegraph/codegen-poplar';
import { DiagnosticError, GraphBuilder, collectVariables, execute, seq, streamIn } from '@tilegraph/ir';
import { buildKey, publish, useEntry } from './build.js';
import { checkCacheDir, clearCache, entryProblem, listCache, parseByteSize, pruneCache, resolveCacheDir, sealEntry } from './cache.js';
import type { Toolchain } from './toolchain.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-cache-test-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const isRoot = process.getuid?.() === 0;

/** A sealed entry folder holding a `step` with the given text. */
function entry(name: string, marker: string, parent = tmp): string {
  const dir = path.join(parent, name);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  fs.writeFileSync(path.join(dir, 'step'), marker, { mode: 0o755 });
  sealEntry(dir, { kind: 'executable', module: name, key: 'k' });
  return dir;
}

function diagnostic(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(DiagnosticError);
    return (e as DiagnosticError).message;
  }
  throw new Error('expected a diagnostic');
}

describe('executable cache entries', () => {
  test('the first finished build wins; a later one is discarded', () => {
    const final = path.join(tmp, 'exe-a');
    publish(entry('.build-1', 'first'), final);
    publish(entry('.build-2', 'second'), final);
    expect(fs.readFileSync(path.join(final, 'step'), 'utf8')).toBe('first');
    expect(fs.existsSync(path.join(tmp, '.build-2'))).toBe(false);
  });

  test('a folder without a manifest, or one that fails its manifest, is replaced', () => {
    const final = path.join(tmp, 'exe-b');
    fs.mkdirSync(final);
    fs.writeFileSync(path.join(final, 'step'), 'half-written');
    publish(entry('.build-3', 'whole'), final);
    expect(fs.readFileSync(path.join(final, 'step'), 'utf8')).toBe('whole');
    fs.writeFileSync(path.join(final, 'step'), 'planted');
    publish(entry('.build-4', 'rebuilt'), final);
    expect(fs.readFileSync(path.join(final, 'step'), 'utf8')).toBe('rebuilt');
    expect(entryProblem(final)).toBeUndefined();
  });

  test('an entry is used only when its files match the manifest and are ours alone', () => {
    const fresh = (n: string) => entry(`exe-check-${n}`, 'x'.repeat(100));
    expect(entryProblem(fresh('ok'), { kind: 'executable', key: 'k', present: ['step'] })).toBeUndefined();
    expect(entryProblem(fresh('kind'), { kind: 'library' })).toMatch(/says it is a executable entry/);
    expect(entryProblem(fresh('key'), { key: 'other' })).toMatch(/names other sources/);
    const truncated = fresh('truncated');
    fs.truncateSync(path.join(truncated, 'step'), 10);
    expect(entryProblem(truncated)).toMatch(/step has 10 bytes, its manifest says 100/);
    const changed = fresh('changed');
    fs.writeFileSync(path.join(changed, 'step'), 'y'.repeat(100));
    expect(entryProblem(changed)).toMatch(/step does not match its checksum/);
    const extra = fresh('extra');
    fs.writeFileSync(path.join(extra, 'codelets.gp'), '');
    expect(entryProblem(extra)).toMatch(/codelets.gp is not in its manifest/);
    const missing = fresh('missing');
    fs.rmSync(path.join(missing, 'step'));
    expect(entryProblem(missing)).toMatch(/step is missing/);
    const link = fresh('link');
    fs.rmSync(path.join(link, 'step'));
    fs.symlinkSync('/bin/sh', path.join(link, 'step'));
    expect(entryProblem(link)).toMatch(/step is not a regular file/);
    const writable = fresh('writable');
    fs.chmodSync(path.join(writable, 'step'), 0o777);
    expect(entryProblem(writable)).toMatch(/step can be written by other users/);
    const unsealed = path.join(tmp, 'exe-check-unsealed');
    fs.mkdirSync(unsealed);
    expect(entryProblem(unsealed)).toMatch(/no manifest/);
    if (isRoot) {
      const foreign = fresh('foreign');
      fs.chownSync(path.join(foreign, 'step'), 12345, 12345);
      expect(entryProblem(foreign)).toMatch(/step belongs to another user \(uid 12345\)/);
      const foreignDir = fresh('foreign-dir');
      fs.chownSync(foreignDir, 12345, 12345);
      expect(entryProblem(foreignDir)).toMatch(/the entry belongs to another user/);
    }
  });

  test('a bad entry is reported once, removed and not used', () => {
    const dir = entry('exe-bad', 'good');
    fs.writeFileSync(path.join(dir, 'step'), 'evil');
    const warnings: string[] = [];
    expect(useEntry(dir, {}, 'executable', (m) => warnings.push(m))).toBe(false);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/the cached executable .*exe-bad is not used: step does not match its checksum; it is removed and rebuilt/);
    expect(fs.existsSync(dir)).toBe(false);
    expect(useEntry(dir, {}, 'executable', (m) => warnings.push(m))).toBe(false);
    expect(warnings).toHaveLength(1);
  });
});

describe('the cache folder', () => {
  test('default: $XDG_CACHE_HOME/tilegraph, else ~/.cache/tilegraph; an explicit folder as given', () => {
    const saved = process.env['XDG_CACHE_HOME'];
    try {
      process.env['XDG_CACHE_HOME'] = '/some/where';
      expect(resolveCacheDir()).toBe('/some/where/tilegraph');
      process.env['XDG_CACHE_HOME'] = 'relative'; // ignored, as the XDG spec says
      expect(resolveCacheDir()).toBe(path.join(os.homedir(), '.cache', 'tilegraph'));
      delete process.env['XDG_CACHE_HOME'];
      expect(resolveCacheDir()).toBe(path.join(os.homedir(), '.cache', 'tilegraph'));
      expect(resolveCacheDir('/my/cache')).toBe('/my/cache');
    } finally {
      if (saved === undefined) delete process.env['XDG_CACHE_HOME'];
      else process.env['XDG_CACHE_HOME'] = saved;
    }
  });

  test('is created private (0700)', () => {
    const dir = path.join(tmp, 'new', 'deep', 'cache');
    checkCacheDir(dir);
    expect(fs.statSync(dir).mode & 0o777).toBe(0o700);
  });

  test('a folder others can write into, a file, or a foreign link is refused with a diagnostic', () => {
    const open = path.join(tmp, 'open');
    fs.mkdirSync(open);
    fs.chmodSync(open, 0o777);
    const m = diagnostic(() => checkCacheDir(open));
    expect(m).toContain(`the executable cache ${open} can be written by other users (mode 777)`);
    expect(m).toContain(`chmod 700 ${open}`);
    expect(m).toContain('Options.enableExecutableCaching(dir)');
    fs.chmodSync(open, 0o770);
    expect(diagnostic(() => checkCacheDir(open))).toMatch(/mode 770/);
    const file = path.join(tmp, 'file');
    fs.writeFileSync(file, '');
    expect(diagnostic(() => checkCacheDir(file))).toMatch(/is not a folder/);
    const link = path.join(tmp, 'link-to-open');
    fs.symlinkSync(open, link);
    expect(diagnostic(() => checkCacheDir(link))).toMatch(/mode 770/);
    const good = path.join(tmp, 'private');
    fs.mkdirSync(good, { mode: 0o700 });
    const goodLink = path.join(tmp, 'link-to-private');
    fs.symlinkSync(good, goodLink);
    expect(checkCacheDir(goodLink)).toBe(goodLink);
    if (isRoot) {
      const foreign = path.join(tmp, 'foreign');
      fs.mkdirSync(foreign, { mode: 0o700 });
      fs.chownSync(foreign, 12345, 12345);
      expect(diagnostic(() => checkCacheDir(foreign))).toMatch(/belongs to another user \(uid 12345\)/);
      fs.lchownSync(goodLink, 12345, 12345);
      expect(diagnostic(() => checkCacheDir(goodLink))).toMatch(/symbolic link made by another user/);
    }
  });
});

describe('listing and pruning', () => {
  /** A cache of three executables used a day apart, a leftover build and an unrelated file. */
  function cache(): string {
    const dir = fs.mkdtempSync(path.join(tmp, 'prune-'));
    const day = 24 * 3600 * 1000;
    ['old', 'middle', 'new'].forEach((n, i) => {
      const e = entry(`exe-${n}-0123`, n.repeat(1000), dir);
      const t = new Date(Date.now() - (3 - i) * day);
      fs.utimesSync(path.join(e, 'manifest.json'), t, t);
    });
    const partial = path.join(dir, '.build-abc-1-2');
    fs.mkdirSync(partial);
    const old = new Date(Date.now() - 2.5 * day);
    fs.utimesSync(partial, old, old);
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'not ours');
    return dir;
  }

  test('list reports every entry, most recently used first', () => {
    const dir = cache();
    fs.writeFileSync(path.join(dir, 'exe-middle-0123', 'step'), 'tampered');
    const list = listCache(dir);
    expect(list.map((e) => [e.name, e.kind, e.module, e.valid])).toEqual([
      ['exe-new-0123', 'executable', 'exe-new-0123', true],
      ['exe-middle-0123', 'executable', 'exe-middle-0123', false],
      ['.build-abc-1-2', 'partial', undefined, false],
      ['exe-old-0123', 'executable', 'exe-old-0123', true],
    ]);
    expect(list[0]!.bytes).toBeGreaterThan(3000);
    expect(listCache(path.join(tmp, 'no-such-cache'))).toEqual([]);
    expect(fs.existsSync(path.join(tmp, 'no-such-cache'))).toBe(false);
  });

  test('prune by size keeps the most recent; invalid entries and old leftovers go first', () => {
    const dir = cache();
    fs.writeFileSync(path.join(dir, 'exe-middle-0123', 'step'), 'tampered');
    const newest = listCache(dir)[0]!;
    const r = pruneCache(dir, { maxBytes: newest.bytes });
    expect(r.removed.map((e) => e.name).sort()).toEqual(['.build-abc-1-2', 'exe-middle-0123', 'exe-old-0123']);
    expect(r.freedBytes).toBeGreaterThan(0);
    expect(r.remainingBytes).toBe(newest.bytes);
    expect(fs.readdirSync(dir).sort()).toEqual(['exe-new-0123', 'notes.txt']);
  });

  test('prune by age; kept entries stay', () => {
    const dir = cache();
    const r = pruneCache(dir, { olderThanDays: 1.5, keep: [path.join(dir, 'exe-old-0123')] });
    expect(r.removed.map((e) => e.name).sort()).toEqual(['.build-abc-1-2', 'exe-middle-0123']);
    expect(pruneCache(dir, { maxBytes: 0 }).removed.map((e) => e.name).sort()).toEqual(['exe-new-0123', 'exe-old-0123']);
  });

  test('clear empties the cache and leaves other files', () => {
    const dir = cache();
    const r = clearCache(dir);
    expect(r.removed).toHaveLength(4);
    expect(fs.readdirSync(dir)).toEqual(['notes.txt']);
  });

  test('sizes', () => {
    expect(parseByteSize('1048576')).toBe(1048576);
    expect(parseByteSize('500M')).toBe(500 * 1024 ** 2);
    expect(parseByteSize('2G')).toBe(2 * 1024 ** 3);
    expect(parseByteSize('1.5GiB')).toBe(1.5 * 1024 ** 3);
    expect(parseByteSize('10kb')).toBe(10240);
    expect(parseByteSize('-1')).toBeUndefined();
    expect(parseByteSize('lots')).toBeUndefined();
  });
});

describe('cache keys', () => {
  const b = new GraphBuilder('g');
  b.output('y', b.op('neg', [b.input('x', 'float32', [2])]));
  const graphs = new Map([['g', b.graph]]);
  const m = { name: 'k', graphs, program: seq(streamIn(['x']), execute('g')), replicationFactor: 1, variables: collectVariables(graphs) };
  const emu: Toolchain = { kind: 'emulation', cxx: 'g++', poplarHost: '/x', version: 'v1' };

  test('the key covers sources, toolchain and options', () => {
    const sources = generatePoplar(m);
    const k = buildKey(sources, emu);
    expect(buildKey(generatePoplar(m), emu)).toBe(k);
    expect(buildKey(sources, { ...emu, version: 'v2' })).not.toBe(k);
    expect(buildKey(generatePoplar(m, { availableMemoryProportion: 0.3 }), emu)).toBe(k); // no matmul: same code
    expect(buildKey(generatePoplar({ ...m, replicationFactor: 2 }), emu)).not.toBe(k);
  });

  test('source locations in comments (the model file path) do not change the key; code does', () => {
    const sources = generatePoplar(m);
    const host = sources.files['host.cpp'];
    const withPath = (text: string): GeneratedSources => ({ ...sources, files: { ...sources.files, 'host.cpp': text } });
    const commented = (p: string) => host.replace(/\n/, `\n  // %1 = neg(%0)  ${p}/model.tg:3:5\n`);
    const k = buildKey(withPath(commented('/home/a')), emu);
    expect(buildKey(withPath(commented('/elsewhere/b')), emu)).toBe(k);
    // a comment that ends in a backslash joins the next line, which is then a comment too
    const joined = (p: string) => host.replace(/\n/, `\n  // ${p}\\\n  int x = 0;\n`);
    expect(buildKey(withPath(joined('a')), emu)).not.toBe(buildKey(withPath(joined('b')), emu));
    expect(buildKey(withPath(host.replace(/\n/, '\n  int extra = 0;\n')), emu)).not.toBe(buildKey(withPath(host.replace(/\n/, '\n  int other = 0;\n')), emu));
  });
});
