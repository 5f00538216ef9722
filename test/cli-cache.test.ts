import { jest } from '@jest/globals';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { buildKey } from '@tilegraph/runtime';
import type { Toolchain } from '@tilegraph/runtime';
import { sealEntry } from '../packages/runtime/src/compiled/cache.js';
import { ROOT } from './support/cli.js';

/**
 * `tilegraph cache ls | prune | clear`, the cache key's independence from the model's path, and a
 * build killed half-way leaving no compiler behind.
 */

jest.setTimeout(10 * 60 * 1000);

const CLI = path.join(ROOT, 'tools/dist/cli.js');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-cli-cache-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function run(args: readonly string[], env: Record<string, string> = {}): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd: ROOT, encoding: 'utf8', timeout: 120_000, env: { ...process.env, ...env } });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** A cache of three sealed executables used a day apart (no build needed) and a file of the user's. */
function cache(dir: string): string {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  ['old', 'middle', 'new'].forEach((n, i) => {
    const e = path.join(dir, `exe-${n}-0123abcd`);
    fs.mkdirSync(e, { mode: 0o700 });
    fs.writeFileSync(path.join(e, 'step'), n.padEnd(6, '_').repeat(512), { mode: 0o755 });
    sealEntry(e, { kind: 'executable', module: `model_${n}`, key: n });
    const t = new Date(Date.now() - (3 - i) * 24 * 3600 * 1000);
    fs.utimesSync(path.join(e, 'manifest.json'), t, t);
  });
  fs.writeFileSync(path.join(dir, 'notes.txt'), 'mine');
  return dir;
}

describe('tilegraph cache', () => {
  test('ls lists the entries with kind, module, size, last use and validity', () => {
    const dir = cache(path.join(tmp, 'ls'));
    fs.writeFileSync(path.join(dir, 'exe-middle-0123abcd', 'step'), 'tampered');
    const r = run(['cache', 'ls', '--dir', dir]);
    expect(r.code).toBe(0);
    const lines = r.out.trimEnd().split('\n');
    expect(lines[0]).toBe(`cache: ${dir}`);
    expect(lines[1]).toMatch(/^NAME +KIND +MODULE +SIZE +LAST USED +VALID$/);
    expect(lines[2]).toMatch(/^exe-new-0123abcd +executable +model_new +\d\.\d KiB +\d{4}-\d\d-\d\d \d\d:\d\d +yes$/);
    expect(lines[3]).toMatch(/^exe-middle-0123abcd +executable +model_middle .* no: step has 8 bytes, its manifest says 3072$/);
    expect(lines[4]).toMatch(/^exe-old-0123abcd +executable +model_old .* yes$/);
    expect(lines[5]).toMatch(/^3 entries, \d+\.\d KiB \(pruned beyond 2\.0 GiB\); 1 invalid/);
    expect(r.out).not.toContain('notes.txt');
  });

  test('without --dir: $XDG_CACHE_HOME/tilegraph', () => {
    const xdg = path.join(tmp, 'xdg');
    cache(path.join(xdg, 'tilegraph'));
    const r = run(['cache', 'ls'], { XDG_CACHE_HOME: xdg });
    expect(r.code).toBe(0);
    expect(r.out).toContain(`cache: ${path.join(xdg, 'tilegraph')}\n`);
    expect(r.out).toContain('exe-old-0123abcd');
  });

  test('prune keeps the most recently used entries within --max-size, or drops those older than --older-than', () => {
    const dir = cache(path.join(tmp, 'prune'));
    const size = run(['cache', 'prune', '--dir', dir, '--max-size', '8K']);
    expect(size.code).toBe(0);
    expect(size.out).toMatch(/^removed exe-old-0123abcd \(executable, \d\.\d KiB\)\nprune: removed 1 entry, freed \d\.\d KiB; the cache holds \d+\.\d KiB/);
    expect(fs.readdirSync(dir).sort()).toEqual(['exe-middle-0123abcd', 'exe-new-0123abcd', 'notes.txt']);
    const age = run(['cache', 'prune', '--dir', dir, '--older-than', '1.5']);
    expect(age.code).toBe(0);
    expect(age.out).toContain('removed exe-middle-0123abcd');
    expect(fs.readdirSync(dir).sort()).toEqual(['exe-new-0123abcd', 'notes.txt']);
    expect(run(['cache', 'prune', '--dir', dir]).out).toMatch(/^prune: nothing to remove/);
    for (const bad of [['--max-size', 'lots'], ['--older-than', '0']]) {
      const r = run(['cache', 'prune', '--dir', dir, ...bad]);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(/argument .* is invalid/);
    }
  });

  test('clear removes every entry and says what went; other files stay', () => {
    const dir = cache(path.join(tmp, 'clear'));
    const r = run(['cache', 'clear', '--dir', dir]);
    expect(r.code).toBe(0);
    expect(r.out).toContain('removed exe-new-0123abcd');
    expect(r.out).toMatch(/clear: removed 3 entries, freed \d+\.\d KiB/);
    expect(fs.readdirSync(dir)).toEqual(['notes.txt']);
  });

  test('a cache folder others can write into is refused (exit 2: the named folder is wrong, with what to do)', () => {
    const dir = path.join(tmp, 'open');
    fs.mkdirSync(dir);
    fs.chmodSync(dir, 0o777);
    const r = run(['cache', 'ls', '--dir', dir]);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`the executable cache ${dir} can be written by other users (mode 777)`);
    expect(r.err).toContain(`chmod 700 ${dir}`);
  });
});

describe('cache keys', () => {
  test('the same model from another path has the same key', () => {
    const emu: Toolchain = { kind: 'emulation', cxx: 'g++', poplarHost: '/x', version: 'v' };
    const keys = ['a', 'b'].map((d) => {
      fs.mkdirSync(path.join(tmp, 'paths', d), { recursive: true });
      const model = path.join(tmp, 'paths', d, 'mlp.tg');
      fs.copyFileSync(path.join(ROOT, 'examples/mlp.tg'), model);
      const out = path.join(tmp, 'paths', `${d}-cpp`);
      expect(run(['compile', model, '--emit-cpp', out]).code).toBe(0);
      const files = Object.fromEntries(['codelets.cpp', 'host.cpp', 'plan.json'].map((f) => [f, fs.readFileSync(path.join(out, f), 'utf8')]));
      expect(files['host.cpp']).toContain(model); // the locations name the path...
      return buildKey({ files, plan: JSON.parse(files['plan.json']!) } as never, emu);
    });
    expect(keys[1]).toBe(keys[0]); // ...but the key does not depend on it
  });
});

describe('an interrupted build', () => {
  /** Processes whose command line mentions `text` (the build's compilers name the cache folder). */
  function processes(text: string): string[] {
    return spawnSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter((l) => l.includes(text) && !l.includes('ps -eo'));
  }
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  test.each(['SIGTERM', 'SIGKILL', 'SIGINT'] as const)('%s to tilegraph leaves no compiler running and no build folder', async (signal) => {
    const xdg = fs.mkdtempSync(path.join(tmp, `kill-${signal}-`));
    const cacheDir = path.join(xdg, 'tilegraph');
    const child = spawn(process.execPath, [CLI, 'compile', 'examples/mlp.tg', '-o', path.join(xdg, 'mlp.tgx')], {
      cwd: ROOT,
      stdio: 'ignore',
      env: { ...process.env, XDG_CACHE_HOME: xdg },
    });
    try {
      // wait for a compiler working in the cache folder
      let seen: string[] = [];
      for (let i = 0; i < 600 && child.exitCode === null; i++) {
        seen = processes(cacheDir).filter((l) => /g\+\+|cc1plus|\bas\b|popc|ld\b|collect2/.test(l));
        if (seen.length) break;
        await sleep(100);
      }
      expect(seen.length).toBeGreaterThan(0);
      child.kill(signal);
      // the runner removes the build folder once the compilers are reaped
      const builds = () => fs.readdirSync(cacheDir).filter((f) => f.startsWith('.build-'));
      for (let i = 0; i < 50 && (processes(cacheDir).length || builds().length); i++) await sleep(100);
      expect(processes(cacheDir)).toEqual([]);
      expect(builds()).toEqual([]);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
