import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import cliProgress from 'cli-progress';
import { DiagnosticError, error } from '@tilegraph/ir';
import { safeFileName } from '@tilegraph/codegen-poplar';
import type { BuildPlan, GeneratedSources } from '@tilegraph/codegen-poplar';
import { Job, JobFailure, runJobsSync } from './sync.js';
import { Toolchain, findToolchain } from './toolchain.js';

/**
 * The build driver: generated sources → an executable, through the SDK (popc + g++) or the
 * emulation (popc-reflect + g++ against poplar-host). Builds happen in a fresh folder and the
 * result is renamed into the cache in one step, so concurrent or interrupted builds never leave
 * a half-written entry; a later build with the same sources, toolchain and options reuses it.
 * Commands are run with argument arrays, never through a shell.
 */

export interface BuildOptions {
  /** Cache folder (Options.enableExecutableCaching); default: tilegraph-cache under os.tmpdir(). */
  cacheDir?: string;
  /** Show a progress bar (only on a terminal). Default true. */
  showProgress?: boolean;
  /** 'auto' picks the SDK when popc is on PATH. */
  toolchain?: 'auto' | 'sdk' | 'emulation';
  /** Longest a whole build may take (default 30 minutes). */
  timeoutMs?: number;
}

/** A built executable in the cache. */
export interface BuiltExecutable {
  /** The cache entry folder: step (the executable), plan.json, sources. */
  readonly dir: string;
  readonly executable: string;
  /** Argument for the executable: the codelets file (codelets.gp for the SDK). */
  readonly args: readonly string[];
  readonly plan: BuildPlan;
  readonly key: string;
  /** True when the executable came from the cache. */
  readonly cached: boolean;
  readonly toolchain: Toolchain['kind'];
}

export function defaultCacheDir(): string {
  return path.join(os.tmpdir(), 'tilegraph-cache');
}

const COMPILE_FLAGS = {
  codelets: ['-std=c++17', '-O2'],
  // the host program only builds the graph: optimising it buys little and costs build time
  host: ['-std=c++17', '-O0'],
  library: ['-std=c++17', '-O2'],
};

/**
 * Moves a finished build folder into place. Another process may have won the race (its entry is
 * kept); a folder without the completion marker is not an entry and is replaced.
 */
export function publish(tmp: string, final: string): void {
  for (let attempt = 0; ; attempt++) {
    try {
      fs.renameSync(tmp, final);
      return;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST' && code !== 'ENOTEMPTY' && code !== 'EPERM') throw e;
      if (isComplete(final)) {
        fs.rmSync(tmp, { recursive: true, force: true });
        return;
      }
      if (attempt > 2) throw e;
      const stale = `${path.join(path.dirname(final), '.build-stale-')}${randomBytes(4).toString('hex')}`;
      try {
        fs.renameSync(final, stale);
        fs.rmSync(stale, { recursive: true, force: true });
      } catch {
        // someone else moved it; try again
      }
    }
  }
}

function isComplete(dir: string): boolean {
  return fs.existsSync(path.join(dir, 'complete'));
}

/** Removes build folders left by interrupted builds (older than a day). */
function sweep(cacheDir: string): void {
  try {
    const day = Date.now() - 24 * 3600 * 1000;
    for (const e of fs.readdirSync(cacheDir)) {
      if (!e.startsWith('.build-')) continue;
      const p = path.join(cacheDir, e);
      if (fs.statSync(p).mtimeMs < day) fs.rmSync(p, { recursive: true, force: true });
    }
  } catch {
    // best effort
  }
}

function tempDir(cacheDir: string, key: string): string {
  fs.mkdirSync(cacheDir, { recursive: true });
  const dir = path.join(cacheDir, `.build-${key.slice(0, 16)}-${process.pid}-${randomBytes(4).toString('hex')}`);
  fs.mkdirSync(dir);
  return dir;
}

function failure(what: string, f: JobFailure, dir: string): DiagnosticError {
  const out = `${f.stderr}${f.stdout}`.trim();
  const lines = out.split('\n');
  const shown = lines.length > 60 ? [...lines.slice(0, 60), `... (${lines.length - 60} more lines)`] : lines;
  return new DiagnosticError(
    error(`${what} failed: ${f.job.label} (${f.code !== null ? `exit code ${f.code}` : f.signal ? `signal ${f.signal}` : 'not run'})`, undefined, [
      `command: ${[f.job.cmd, ...f.job.args].join(' ')}`,
      `build folder: ${dir}`,
      ...shown,
    ]),
  );
}

interface Progress {
  step(label: string): void;
  tick(): void;
  stop(): void;
}

function progressBar(total: number, title: string, show: boolean): Progress {
  if (!show || !process.stderr.isTTY) return { step: () => undefined, tick: () => undefined, stop: () => undefined };
  const bar = new cliProgress.SingleBar(
    { format: `${title} [{bar}] {percentage}% | {value}/{total} | {label} | {duration_formatted}`, stream: process.stderr, synchronousUpdate: true, hideCursor: true, clearOnComplete: true },
    cliProgress.Presets.shades_classic,
  );
  let done = 0;
  bar.start(total, 0, { label: 'starting' });
  return {
    step(label) {
      done++;
      bar.update(done, { label });
    },
    tick() {
      bar.update(done);
    },
    stop() {
      bar.stop();
    },
  };
}

/** Runs the stages of a build; throws a diagnostic with the compiler output on failure. */
function runBuild(stages: Job[][], what: string, dir: string, opts: BuildOptions, title: string): void {
  const total = stages.reduce((n, s) => n + s.length, 0);
  const bar = progressBar(total, title, opts.showProgress ?? true);
  try {
    const f = runJobsSync(stages, {
      parallel: Math.max(1, Math.min(os.cpus().length, 4)),
      timeoutMs: opts.timeoutMs ?? 30 * 60 * 1000,
      onProgress: (label) => bar.step(label),
      tick: () => bar.tick(),
    });
    if (f) throw failure(what, f, dir);
  } finally {
    bar.stop();
  }
}

/** libpoplar_host.a for this toolchain, built once into the cache. */
function emulationLibrary(t: Extract<Toolchain, { kind: 'emulation' }>, cacheDir: string, opts: BuildOptions): string {
  const final = path.join(cacheDir, `poplar-host-${t.version.slice(0, 24)}`);
  const lib = path.join(final, 'lib', 'libpoplar_host.a');
  if (isComplete(final)) return lib;
  const tmp = tempDir(cacheDir, t.version);
  fs.mkdirSync(path.join(tmp, 'lib'));
  fs.mkdirSync(path.join(tmp, 'obj'));
  const srcDir = path.join(t.poplarHost, 'src');
  const sources = fs.readdirSync(srcDir).filter((f) => f.endsWith('.cpp')).sort();
  const include = path.join(t.poplarHost, 'include');
  const compile: Job[] = sources.map((f) => ({
    cmd: t.cxx,
    args: [...COMPILE_FLAGS.library, '-I', include, '-I', srcDir, '-c', path.join(srcDir, f), '-o', path.join(tmp, 'obj', f.replace(/\.cpp$/, '.o'))],
    cwd: tmp,
    label: f,
  }));
  const objects = sources.map((f) => path.join(tmp, 'obj', f.replace(/\.cpp$/, '.o')));
  const archive: Job = { cmd: 'ar', args: ['rcs', path.join(tmp, 'lib', 'libpoplar_host.a'), ...objects], cwd: tmp, label: 'libpoplar_host.a' };
  runBuild([compile, [archive]], 'building the Poplar emulation library', tmp, opts, 'poplar-host');
  fs.rmSync(path.join(tmp, 'obj'), { recursive: true, force: true });
  fs.writeFileSync(path.join(tmp, 'complete'), '');
  publish(tmp, final);
  return lib;
}

/** The cache key: sources, toolchain and compile options. */
export function buildKey(sources: GeneratedSources, t: Toolchain): string {
  const h = createHash('sha256');
  h.update('tilegraph-executable-v1\0');
  for (const [name, text] of Object.entries(sources.files)) h.update(`${name}\0${text}\0`);
  h.update(`${t.kind}\0${t.version}\0${JSON.stringify(COMPILE_FLAGS)}\0`);
  return h.digest('hex');
}

/** Builds (or finds in the cache) the executable for generated sources. */
export function buildExecutable(sources: GeneratedSources, opts: BuildOptions = {}): BuiltExecutable {
  let t: Toolchain;
  try {
    t = findToolchain(opts.toolchain ?? 'auto');
  } catch (e) {
    throw new DiagnosticError(error((e as Error).message));
  }
  const cacheDir = path.resolve(opts.cacheDir ?? defaultCacheDir());
  fs.mkdirSync(cacheDir, { recursive: true });
  const key = buildKey(sources, t);
  // the module name makes entries recognisable; the key alone decides a hit
  const final = path.join(cacheDir, `exe-${safeFileName(sources.plan.module).slice(0, 32)}-${key.slice(0, 40)}`);
  const args = t.kind === 'sdk' ? [path.join(final, 'codelets.gp')] : [];
  const result = (cached: boolean): BuiltExecutable => ({
    dir: final,
    executable: path.join(final, 'step'),
    args,
    plan: sources.plan,
    key,
    cached,
    toolchain: t.kind,
  });
  if (isComplete(final)) return result(true);
  sweep(cacheDir);

  const tmp = tempDir(cacheDir, key);
  for (const [name, text] of Object.entries(sources.files)) fs.writeFileSync(path.join(tmp, name), text);
  const out = (f: string) => path.join(tmp, f);
  let stages: Job[][];
  if (t.kind === 'sdk') {
    stages = [
      [
        { cmd: t.popc, args: ['-O3', '--target', 'ipu2', out('codelets.cpp'), '-o', out('codelets.gp')], cwd: tmp, label: 'popc codelets.cpp' },
        { cmd: t.cxx, args: [...COMPILE_FLAGS.host, '-c', out('host.cpp'), '-o', out('host.o')], cwd: tmp, label: 'host.cpp' },
      ],
      [{ cmd: t.cxx, args: [out('host.o'), '-o', out('step'), '-lpoplar', '-lpopops', '-lpoplin', '-lpoputil', '-lgcl'], cwd: tmp, label: 'link' }],
    ];
  } else {
    const lib = emulationLibrary(t, cacheDir, opts);
    const include = path.join(t.poplarHost, 'include');
    const cxx = (flags: string[], src: string, obj: string, label: string): Job => ({
      cmd: t.cxx,
      args: [...flags, '-I', include, '-c', out(src), '-o', out(obj)],
      cwd: tmp,
      label,
    });
    stages = [
      [
        { cmd: t.node, args: [path.join(t.poplarHost, 'tools', 'popc-reflect.js'), out('codelets.cpp'), '-o', out('codelets_registry.cpp')], cwd: tmp, label: 'popc-reflect' },
        cxx(COMPILE_FLAGS.host, 'host.cpp', 'host.o', 'host.cpp'),
        cxx(COMPILE_FLAGS.codelets, 'codelets.cpp', 'codelets.o', 'codelets.cpp'),
      ],
      [cxx(COMPILE_FLAGS.codelets, 'codelets_registry.cpp', 'codelets_registry.o', 'codelets_registry.cpp')],
      [{ cmd: t.cxx, args: [out('host.o'), out('codelets.o'), out('codelets_registry.o'), lib, '-lpthread', '-o', out('step')], cwd: tmp, label: 'link' }],
    ];
  }
  runBuild(stages, `building ${JSON.stringify(sources.plan.module)}`, tmp, opts, 'compiling');
  for (const f of fs.readdirSync(tmp)) if (f.endsWith('.o')) fs.rmSync(path.join(tmp, f));
  const info = { module: sources.plan.module, key, toolchain: t.kind, toolchainVersion: t.version, flags: COMPILE_FLAGS, built: new Date().toISOString() };
  fs.writeFileSync(path.join(tmp, 'cache-info.json'), `${JSON.stringify(info, null, 2)}\n`);
  fs.writeFileSync(path.join(tmp, 'complete'), '');
  publish(tmp, final);
  return result(false);
}
