import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { progressBar } from '../progress.js';
import { DiagnosticError, error } from '@tilegraph/ir';
import { hostUnits, safeFileName } from '@tilegraph/codegen-poplar';
import type { BuildPlan, DeviceChoice, GeneratedSources } from '@tilegraph/codegen-poplar';
import { Job, JobFailure, JobsRunner, runJobs, startJobsRunner, stopJobsRunner } from './sync.js';
import { Waiting, driveSync } from './drive.js';
import { SdkVersion, Toolchain, findOnPath, findToolchain, firstLine } from './toolchain.js';
import { BuildInputs, explainCacheMiss } from './explain.js';
import { ReflectError, generate as generateRegistry } from '../../poplar-host/tools/popc-reflect.js';
import { EntryExpectation, ManifestInfo, autoPrune, cacheMaxBytes, checkCacheDir, discardEntry, entryProblem, exists, resolveCacheDir, sealEntry, stderrWarning, touchEntry } from './cache.js';

/**
 * The build driver: generated sources → an executable, through the SDK (popc + g++) or the
 * emulation (popc-reflect + g++ against poplar-host). Builds happen in a fresh folder, are sealed
 * with a manifest of checksums and renamed into the cache in one step, so concurrent or
 * interrupted builds never leave a half-written entry; a later build with the same sources,
 * toolchain and options reuses the entry once it has checked it against its manifest.
 * Commands are run with argument arrays, never through a shell.
 */

export interface BuildOptions {
  /** Cache folder (Options.enableExecutableCaching); default: $XDG_CACHE_HOME/tilegraph or ~/.cache/tilegraph. */
  cacheDir?: string;
  /** Where warnings go (a damaged cache entry that is rebuilt); default: `tilegraph: warning: ...` on stderr. */
  warn?: (msg: string) => void;
  /** Show a progress bar (only on a terminal). Default true. */
  showProgress?: boolean;
  /** 'auto' picks the SDK when popc is on PATH. */
  toolchain?: 'auto' | 'sdk' | 'emulation';
  /** Longest a whole build may take (default 30 minutes). */
  timeoutMs?: number;
  /** The device the program runs on, which decides the codelets' popc targets (default IPU hardware, Mk2). */
  device?: DeviceChoice;
}

/**
 * popc's targets for the device: the IPU Model runs codelets compiled for the host (`cpu`);
 * hardware runs the IPU's own (`ipu2` for Mk2, with `ipu21` for Bow systems from SDK 3.0, `ipu1`
 * for Mk1). An unknown SDK release is taken to be a current one.
 */
export function popcTargets(device: DeviceChoice | undefined, sdk: SdkVersion | undefined): string[] {
  if (device?.kind === 'ipu-model') return ['cpu'];
  const arch = device?.arch ?? 'ipu2';
  if (arch === 'ipu1') return ['ipu1'];
  const current = !sdk || sdk.major >= 3;
  return arch === 'ipu21' ? ['ipu21'] : current ? ['ipu2', 'ipu21'] : ['ipu2'];
}

/** The GCL library: libgcl from SDK 3.0, libgcl_ct before (an unknown release is taken to be current). */
export function gclLibrary(sdk: SdkVersion | undefined): string {
  return !sdk || sdk.major >= 3 ? '-lgcl' : '-lgcl_ct';
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
  /** When it did not: why not, in words (see explainCacheMiss). */
  readonly missReason?: string;
  readonly toolchain: Toolchain['kind'];
}

/** The cache folder used when none is given ($XDG_CACHE_HOME/tilegraph or ~/.cache/tilegraph). */
export function defaultCacheDir(): string {
  return resolveCacheDir();
}

const COMPILE_FLAGS = {
  // the vectoriser at -O2 (GCC 12 on) only takes loops that need no run-time checks; the fused
  // element-wise vertices need one (do the output and the inputs overlap?) to vectorise. GCC
  // contracts a * b + c into a fused multiply-add wherever the target has one, which the
  // vertices built for wider vectors (TG_WIDE) do: off, so every build gives the same bits
  codelets: ['-std=c++17', '-O2', '-ftree-vectorize', '-fvect-cost-model=dynamic', '-ffp-contract=off'],
  // the host program only builds the graph: optimising it buys little and costs build time
  host: ['-std=c++17', '-O0'],
  library: ['-std=c++17', '-O2'],
};

/** The host support library's files among the generated sources (built once per toolchain, not per model). */
const SUPPORT_SOURCE = 'tilegraph_host.cpp' as const;
const SUPPORT_HEADER = 'tilegraph_host.hpp' as const;

/** The generated files the compilers read (the build plan aside). */
function compiledFiles(sources: GeneratedSources): [string, string][] {
  return Object.entries(sources.files)
    .filter(([name]) => name.endsWith('.cpp') || name.endsWith('.hpp'))
    .sort(([a], [b]) => (a < b ? -1 : 1));
}

/**
 * Moves a finished (sealed) build folder into place. Another process may have won the race: its
 * entry is kept when it passes `check`; anything else in the way is discarded.
 */
export function publish(tmp: string, final: string, check: (dir: string) => string | undefined = (d) => entryProblem(d)): void {
  for (let attempt = 0; ; attempt++) {
    try {
      fs.renameSync(tmp, final);
      return;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST' && code !== 'ENOTEMPTY' && code !== 'EPERM') throw e;
      if (check(final) === undefined) {
        fs.rmSync(tmp, { recursive: true, force: true });
        return;
      }
      if (attempt > 2) throw e;
      discardEntry(final);
    }
  }
}

/** Removes build folders left by interrupted builds (older than a day). */
function sweep(cacheDir: string): void {
  try {
    const day = Date.now() - 24 * 3600 * 1000;
    for (const e of fs.readdirSync(cacheDir)) {
      if (!e.startsWith('.build-') && !e.startsWith('.trash-')) continue;
      const p = path.join(cacheDir, e);
      if (e.startsWith('.trash-') || fs.lstatSync(p).mtimeMs < day) fs.rmSync(p, { recursive: true, force: true });
    }
  } catch {
    // best effort
  }
}

function tempDir(cacheDir: string, key: string): string {
  const dir = path.join(cacheDir, `.build-${key.slice(0, 16)}-${process.pid}-${randomBytes(4).toString('hex')}`);
  fs.mkdirSync(dir, { mode: 0o700 });
  return dir;
}

/** Removes a build folder that will not be published (kept for inspection with TILEGRAPH_DEBUG). */
function dropBuild(dir: string): void {
  if (process.env['TILEGRAPH_DEBUG']) return;
  try {
    fs.rmSync(dir, { recursive: true, force: true });
  } catch {
    // swept later
  }
}

/**
 * Uses the entry at `dir` if it checks out (and marks it used); a damaged, incomplete or foreign
 * entry is reported once and discarded so it is rebuilt. True when the entry can be used.
 */
export function useEntry(dir: string, expect: EntryExpectation, what: string, warn: (msg: string) => void, discarded?: (problem: string) => void): boolean {
  if (!exists(dir)) return false;
  const problem = entryProblem(dir, expect);
  if (problem === undefined) {
    touchEntry(dir);
    return true;
  }
  discarded?.(problem);
  warn(`the cached ${what} ${dir} is not used: ${problem}; it is removed and rebuilt`);
  discardEntry(dir);
  return false;
}

function failure(what: string, f: JobFailure, dir: string): DiagnosticError {
  const out = `${f.stderr}${f.stdout}`.trim();
  const lines = out.split('\n');
  const shown = lines.length > 60 ? [...lines.slice(0, 60), `... (${lines.length - 60} more lines)`] : lines;
  return new DiagnosticError(
    error(`${what} failed: ${f.job.label} (${f.code !== null ? `exit code ${f.code}` : f.signal ? `signal ${f.signal}` : 'not run'})`, undefined, [
      `command: ${[f.job.cmd, ...f.job.args].join(' ')}`,
      process.env['TILEGRAPH_DEBUG'] ? `build folder (kept because TILEGRAPH_DEBUG is set): ${dir}` : 'the build folder was removed (set TILEGRAPH_DEBUG=1 to keep it)',
      ...shown,
    ]),
  );
}

/** Runs the stages of a build; throws a diagnostic with the compiler output on failure. */
function* runBuild(stages: Job[][], what: string, dir: string, opts: BuildOptions, title: string, runner?: JobsRunner): Waiting<void> {
  const total = stages.reduce((n, s) => n + s.length, 0);
  let done = 0;
  const bar = progressBar(title, total, 'jobs', { show: opts.showProgress ?? true, label: 'starting' });
  try {
    const f = yield* runJobs(stages, {
      // if this process dies mid-build, the runner kills the compilers and removes the folder
      cleanup: process.env['TILEGRAPH_DEBUG'] ? undefined : dir,
      ...(runner ? { runner } : {}),
      parallel: Math.max(1, Math.min(os.cpus().length, 4)),
      timeoutMs: opts.timeoutMs ?? 30 * 60 * 1000,
      onProgress: (label) => bar.update(++done, label),
      tick: () => bar.tick(),
    });
    if (f) throw failure(what, f, dir);
  } finally {
    bar.stop();
  }
}

/**
 * A library entry of the cache: used when it checks out, else built by `build` in a fresh folder
 * (which returns what the manifest records), sealed and published in one step.
 */
function* cachedLibrary<T>(cacheDir: string, final: string, expect: EntryExpectation, what: string, warn: (msg: string) => void, result: T, build: (tmp: string) => Waiting<ManifestInfo>): Waiting<T> {
  if (useEntry(final, expect, what, warn)) return result;
  const tmp = tempDir(cacheDir, path.basename(final));
  try {
    sealEntry(tmp, yield* build(tmp));
    publish(tmp, final, (d) => entryProblem(d, expect));
  } catch (e) {
    dropBuild(tmp);
    throw e;
  }
  touchEntry(final);
  return result;
}

/** The headers popc-reflect's codelets registry starts with (see poplar-host/tools/popc-reflect.js). */
const REGISTRY_INCLUDES = '#include <poplar/Vertex.hpp>\n#include <poplar_host/VertexRegistry.hpp>\n#include <cmath>\n';

/** libpoplar_host.a for this toolchain, built once into the cache (checked before every link). */
function* emulationLibrary(t: Extract<Toolchain, { kind: 'emulation' }>, cacheDir: string, opts: BuildOptions, warn: (msg: string) => void): Waiting<{ dir: string; lib: string; pch: string[] }> {
  // v2: with the registry's precompiled header
  const final = path.join(cacheDir, `poplar-host-v2-${t.version.slice(0, 24)}`);
  const lib = path.join(final, 'lib', 'libpoplar_host.a');
  const result = { dir: final, lib, pch: pchFlags(path.join(final, 'pch'), REGISTRY_PCH_HEADER) };
  const expect: EntryExpectation = { kind: 'library', key: `${t.version}/v2`, present: ['lib/libpoplar_host.a', `pch/${REGISTRY_PCH_HEADER}`] };
  return yield* cachedLibrary(cacheDir, final, expect, 'Poplar emulation library', warn, result, function* (tmp) {
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
    // the headers every codelets registry starts with, precompiled
    fs.mkdirSync(path.join(tmp, 'pch'));
    const pch = path.join(tmp, 'pch', REGISTRY_PCH_HEADER);
    fs.writeFileSync(pch, REGISTRY_INCLUDES);
    const header: Job = { cmd: t.cxx, args: [...COMPILE_FLAGS.codelets, '-I', include, '-x', 'c++-header', pch, '-o', `${pch}.gch`], cwd: tmp, label: REGISTRY_PCH_HEADER };
    yield* runBuild([[...compile, header], [archive]], 'building the Poplar emulation library', tmp, opts, 'poplar-host');
    fs.rmSync(path.join(tmp, 'obj'), { recursive: true, force: true });
    return { kind: 'library', key: `${t.version}/v2`, compiler: t.cxx, flags: COMPILE_FLAGS.library };
  });
}

/** The MPI shim poplar-host loads in a distributed run (poplar-host/mpi), built once per OpenMPI and shim source. */
export interface MpiLibrary {
  readonly lib: string;
}

/**
 * libtilegraph_mpi.so for this machine's OpenMPI: poplar-host stays free of MPI and loads the
 * shim (dlopen) only when a run spans several processes. Built with mpicxx into the cache.
 */
export function* mpiLibrarySteps(opts: BuildOptions = {}): Waiting<MpiLibrary> {
  let t: Toolchain;
  try {
    t = findToolchain(opts.toolchain ?? 'auto');
  } catch (e) {
    throw new DiagnosticError(error((e as Error).message));
  }
  if (t.kind !== 'emulation') {
    throw new DiagnosticError(
      error('a run over several processes (Options.Distributed) runs on the emulated target only', undefined, [
        'with the Poplar SDK, the program would have to be compiled for each process\'s own replicas with GCL\'s multi-instance settings, which tilegraph does not generate',
        'run it on the emulation (--toolchain emulation), or as one process',
      ]),
    );
  }
  const mpicxx = findOnPath('mpicxx');
  if (!mpicxx) {
    throw new DiagnosticError(
      error('a run over several processes (Options.Distributed) needs OpenMPI, and mpicxx is not on PATH', undefined, [
        'install it (Debian: apt-get install openmpi-bin libopenmpi-dev) and start the processes with mpirun',
      ]),
    );
  }
  const warn = opts.warn ?? stderrWarning;
  const cacheDir = cacheFolder(opts);
  const srcDir = path.join(t.poplarHost, 'mpi');
  const files = ['tilegraph_mpi.h', 'tilegraph_mpi.cpp'];
  const h = createHash('sha256').update('tilegraph-mpi-v1\0');
  for (const f of files) h.update(`${f}\0${fs.readFileSync(path.join(srcDir, f), 'utf8')}\0`);
  h.update(firstLine(mpicxx, ['--version']));
  const key = h.digest('hex');
  const final = path.join(cacheDir, `tilegraph-mpi-${key.slice(0, 24)}`);
  const lib = path.join(final, 'lib', 'libtilegraph_mpi.so');
  const expect: EntryExpectation = { kind: 'library', key, present: ['lib/libtilegraph_mpi.so'] };
  const flags = ['-std=c++17', '-O2', '-shared', '-fPIC'];
  return yield* cachedLibrary(cacheDir, final, expect, 'MPI library', warn, { lib }, function* (tmp) {
    fs.mkdirSync(path.join(tmp, 'lib'));
    const job: Job = { cmd: mpicxx, args: [...flags, '-I', srcDir, path.join(srcDir, 'tilegraph_mpi.cpp'), '-o', path.join(tmp, 'lib', 'libtilegraph_mpi.so')], cwd: tmp, label: 'tilegraph_mpi.cpp' };
    yield* runBuild([[job]], 'building the MPI library', tmp, opts, 'MPI');
    return { kind: 'library', key, compiler: mpicxx, flags };
  });
}

/** The #include lines at the head of a generated host.cpp (the same for every model): its precompiled header. */
export function hostIncludeBlock(host: string): string {
  const lines: string[] = [];
  for (const line of host.split('\n')) {
    if (line.startsWith('#include ')) lines.push(line);
    else if (line.trim() !== '' && !line.startsWith('//')) break;
  }
  return `${lines.join('\n')}\n`;
}

/** A precompiled header made in `dir`: `-I dir -include name` gives it to a compile with the same flags. */
const PCH_HEADER = 'tilegraph_pch.hpp';
const REGISTRY_PCH_HEADER = 'registry_pch.hpp';
const pchFlags = (dir: string, header: string) => ['-I', dir, '-include', header];

/**
 * The host support library every generated host program links (libtilegraph_host.a, from
 * tilegraph_host.cpp) and a precompiled header of the headers every host.cpp starts with, built
 * once per toolchain and library source into the cache (checked before every use): the fixed
 * part of a host program is neither compiled nor parsed again for each model.
 */
function* supportLibrary(t: Toolchain, sources: GeneratedSources, cacheDir: string, opts: BuildOptions, warn: (msg: string) => void): Waiting<{ dir: string; lib: string; pch: string[] }> {
  const includes = hostIncludeBlock(sources.files['host.cpp']);
  const text = [SUPPORT_HEADER, SUPPORT_SOURCE].map((f) => `${f}\0${sources.files[f]}\0`).join('') + includes;
  const key = createHash('sha256').update(`tilegraph-host-v1\0${t.kind}\0${t.version}\0${JSON.stringify(COMPILE_FLAGS)}\0${text}`).digest('hex');
  const final = path.join(cacheDir, `tilegraph-host-${key.slice(0, 24)}`);
  const lib = path.join(final, 'lib', 'libtilegraph_host.a');
  const result = { dir: final, lib, pch: pchFlags(path.join(final, 'pch'), PCH_HEADER) };
  const expect: EntryExpectation = { kind: 'library', key, present: ['lib/libtilegraph_host.a', `pch/${PCH_HEADER}`] };
  return yield* cachedLibrary(cacheDir, final, expect, 'host support library', warn, result, function* (tmp) {
    fs.mkdirSync(path.join(tmp, 'lib'));
    fs.mkdirSync(path.join(tmp, 'pch'));
    for (const f of [SUPPORT_HEADER, SUPPORT_SOURCE]) fs.writeFileSync(path.join(tmp, f), sources.files[f]);
    fs.writeFileSync(path.join(tmp, 'pch', SUPPORT_HEADER), sources.files[SUPPORT_HEADER]);
    fs.writeFileSync(path.join(tmp, 'pch', PCH_HEADER), includes);
    const include = t.kind === 'emulation' ? ['-I', path.join(t.poplarHost, 'include')] : [];
    const object = path.join(tmp, 'tilegraph_host.o');
    const pch = path.join(tmp, 'pch', PCH_HEADER);
    yield* runBuild(
      [
        [
          { cmd: t.cxx, args: [...COMPILE_FLAGS.library, ...include, '-c', path.join(tmp, SUPPORT_SOURCE), '-o', object], cwd: tmp, label: SUPPORT_SOURCE },
          { cmd: t.cxx, args: [...COMPILE_FLAGS.host, ...include, '-x', 'c++-header', pch, '-o', `${pch}.gch`], cwd: tmp, label: PCH_HEADER },
        ],
        [{ cmd: 'ar', args: ['rcs', path.join(tmp, 'lib', 'libtilegraph_host.a'), object], cwd: tmp, label: 'libtilegraph_host.a' }],
      ],
      'building the host support library',
      tmp,
      opts,
      'host support',
    );
    fs.rmSync(object);
    return { kind: 'library', key, compiler: t.cxx, flags: COMPILE_FLAGS };
  });
}

/**
 * The text of a source file as far as the compiler is concerned: whole-line comments (where the
 * generator puts source locations, which name the model file's path) are blanked, so the same
 * model loaded from another path finds the same entry. Lines joined by a backslash and lines
 * touching block comments are kept as they are.
 */
function compiledText(text: string): string {
  const lines = text.split('\n');
  let joined = false;
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!;
    const continues = /(\\|\?\?\/)\s*$/.test(l);
    if (!joined && !continues && /^\s*\/\//.test(l) && !l.includes('/*') && !l.includes('*/')) lines[i] = '';
    joined = continues;
  }
  return lines.join('\n');
}

/**
 * The cache key: what the compiler sees (the C++ sources, comments aside), the toolchain and the
 * compile options. The plan is not part of it: the executable depends on the sources alone and
 * the plan used is always the one just generated.
 */
export function buildKey(sources: GeneratedSources, t: Toolchain): string {
  const h = createHash('sha256');
  h.update('tilegraph-executable-v2\0');
  for (const [name, text] of compiledFiles(sources)) h.update(`${name}\0${compiledText(text)}\0`);
  h.update(`${t.kind}\0${t.version}\0${JSON.stringify(COMPILE_FLAGS)}\0`);
  return h.digest('hex');
}

/** What a build is made from, file by file, as its manifest records it (for explainCacheMiss). */
function buildInputs(sources: GeneratedSources, t: Toolchain): BuildInputs {
  const digests: Record<string, string> = {};
  for (const [name, text] of compiledFiles(sources)) digests[name] = createHash('sha256').update(compiledText(text)).digest('hex');
  return { sources: digests, toolchainVersion: t.version, flags: JSON.stringify(COMPILE_FLAGS) };
}

/** The cache folder for these options, created if needed and refused when others could write into it. */
function cacheFolder(opts: BuildOptions): string {
  return checkCacheDir(resolveCacheDir(opts.cacheDir));
}

/** A translation unit of a model's build as a cache entry of its own, named by what its compiler reads. */
interface ObjectEntry {
  readonly file: string;
  readonly dir: string;
  readonly object: string;
  readonly expect: EntryExpectation;
}

function objectEntry(cacheDir: string, file: string, reads: readonly string[]): ObjectEntry {
  const key = createHash('sha256').update(`tilegraph-object-v1\0${file}\0${reads.join('\0')}`).digest('hex');
  const dir = path.join(cacheDir, `obj-${file.replace(/\.cpp$/, '')}-${key.slice(0, 32)}`);
  return { file, dir, object: path.join(dir, file.replace(/\.cpp$/, '.o')), expect: { kind: 'object', key, present: [file.replace(/\.cpp$/, '.o')] } };
}

/**
 * The translation units of an emulated build, each cached by its content: the host program
 * (host.cpp, and host_layers.cpp when the program has outlined layers, against the support
 * library's header) and the codelets' registry (popc-reflect's output for codelets.cpp, which it
 * includes). A change to one rebuilds only that one. Returns the objects to link (an entry's, or
 * one still to be compiled under `at` by `stages`) and `publish`, which moves the newly compiled
 * ones into their entries once the stages have run.
 */
function emulationObjects(
  t: Extract<Toolchain, { kind: 'emulation' }>,
  sources: GeneratedSources,
  cacheDir: string,
  at: string,
  lib: { readonly dir: string; readonly pch: readonly string[] },
  support: { readonly dir: string; readonly pch: readonly string[] },
  warn: (msg: string) => void,
): { objects: string[]; dirs: string[]; stages: Job[][]; publish: () => void } {
  const include = path.join(t.poplarHost, 'include');
  // the library entries' names carry their keys: the headers and precompiled headers each unit reads
  const hostFiles = hostUnits(sources.files);
  const hosts = hostFiles.map((f) => objectEntry(cacheDir, f, [t.version, JSON.stringify(COMPILE_FLAGS.host), path.basename(support.dir), compiledText(sources.files[f]!)]));
  const registry = objectEntry(cacheDir, 'codelets_registry.cpp', [t.version, JSON.stringify(COMPILE_FLAGS.codelets), path.basename(lib.dir), compiledText(sources.files['codelets.cpp'])]);
  const all = [...hosts, registry];
  // the longest compiles start first, so that the cores finish together: the registry (codelets
  // at -O2), then the host program's units, largest first
  const bySize = (o: ObjectEntry) => (o === registry ? Infinity : sources.files[o.file as ReturnType<typeof hostUnits>[number]]!.length);
  const missing = new Map(
    all
      .filter((o) => !useEntry(o.dir, o.expect, 'compiled object', warn))
      .sort((a, b) => bySize(b) - bySize(a))
      .map((o) => [o, path.join(at, path.basename(o.dir))]),
  );
  const jobs: Job[] = [];
  const builtObject = (o: ObjectEntry) => path.join(missing.get(o)!, path.basename(o.object));
  for (const [o, dir] of missing) {
    fs.mkdirSync(dir, { recursive: true });
    if (o !== registry) {
      fs.writeFileSync(path.join(dir, o.file), sources.files[o.file as ReturnType<typeof hostUnits>[number]]!);
      jobs.push({ cmd: t.cxx, args: [...COMPILE_FLAGS.host, ...support.pch, '-I', include, '-c', path.join(dir, o.file), '-o', builtObject(o)], cwd: dir, label: o.file });
    } else {
      // The registry includes codelets.cpp (popc-reflect's stand-in for popc), so the codelets
      // are compiled once, there. popc-reflect runs here, in a few milliseconds, where a process
      // of its own would take a tenth of a second to start, on the way to the longest compile.
      fs.writeFileSync(path.join(dir, 'codelets.cpp'), sources.files['codelets.cpp']);
      reflectCodelets(path.join(dir, 'codelets.cpp'), path.join(dir, 'codelets_registry.cpp'), warn);
      jobs.push({ cmd: t.cxx, args: [...COMPILE_FLAGS.codelets, ...lib.pch, '-I', include, '-c', path.join(dir, 'codelets_registry.cpp'), '-o', builtObject(o)], cwd: dir, label: 'codelets_registry.cpp' });
    }
  }
  const publishAll = () => {
    for (const [o, dir] of missing) {
      // the entry holds the object alone (the executable's entry keeps the sources)
      for (const f of fs.readdirSync(dir)) if (f !== path.basename(o.object)) fs.rmSync(path.join(dir, f));
      sealEntry(dir, { kind: 'object', key: o.expect.key!, module: sources.plan.module, source: o.file });
      publish(dir, o.dir, (d) => entryProblem(d, o.expect));
      touchEntry(o.dir);
    }
  };
  return {
    objects: all.map((o) => (missing.has(o) ? builtObject(o) : o.object)),
    dirs: all.map((o) => o.dir),
    stages: jobs.length > 0 ? [jobs] : [],
    publish: publishAll,
  };
}

/** popc-reflect's registry for a codelets file; a file it cannot read is reported as a failed build step. */
function reflectCodelets(codelets: string, registry: string, warn: (msg: string) => void): void {
  try {
    generateRegistry([codelets], registry, (msg) => warn(`popc-reflect: ${msg}`));
  } catch (e) {
    if (!(e instanceof ReflectError)) throw e;
    throw new DiagnosticError(error(`the build failed: popc-reflect could not read the codelets: ${e.message}`, undefined, ['the generated codelets.cpp is kept in the build folder when TILEGRAPH_DEBUG=1 is set']));
  }
}

/** The build folder's subfolder where objects not in the cache are compiled (moved into their entries after the link). */
const OBJECTS = 'objects';

/** Builds (or finds in the cache) the executable for generated sources. */
export function buildExecutable(sources: GeneratedSources, opts: BuildOptions = {}): BuiltExecutable {
  return driveSync(buildExecutableSteps(sources, opts));
}

/** buildExecutable as Waiting work (see drive.ts). */
export function* buildExecutableSteps(sources: GeneratedSources, opts: BuildOptions = {}): Waiting<BuiltExecutable> {
  let t: Toolchain;
  try {
    t = findToolchain(opts.toolchain ?? 'auto');
  } catch (e) {
    throw new DiagnosticError(error((e as Error).message));
  }
  const warn = opts.warn ?? stderrWarning;
  const cacheDir = cacheFolder(opts);
  const maxBytes = cacheMaxBytes();
  const key = buildKey(sources, t);
  // the module name makes entries recognisable; the key alone decides a hit
  const final = path.join(cacheDir, `exe-${safeFileName(sources.plan.module).slice(0, 32)}-${key.slice(0, 40)}`);
  const args = t.kind === 'sdk' ? [path.join(final, 'codelets.gp')] : [];
  const result = (cached: boolean, missReason?: string): BuiltExecutable => ({
    dir: final,
    executable: path.join(final, 'step'),
    args,
    plan: sources.plan,
    key,
    cached,
    toolchain: t.kind,
    ...(missReason !== undefined ? { missReason } : {}),
  });
  const expect: EntryExpectation = { kind: 'executable', key, present: t.kind === 'sdk' ? ['step', 'codelets.gp'] : ['step'] };
  let damaged: string | undefined;
  if (useEntry(final, expect, 'executable', warn, (problem) => (damaged = problem))) return result(true);
  // the build runner (a node process) starts now, while the libraries are checked and the
  // sources written, rather than in front of the compilers
  const runner = startJobsRunner();
  let runnerUsed = false;
  try {
    const inputs = buildInputs(sources, t);
    // worked out before this build adds its own entry
    const missReason = explainCacheMiss(cacheDir, sources.plan.module, inputs, damaged);
    sweep(cacheDir);

    const lib = t.kind === 'emulation' ? yield* emulationLibrary(t, cacheDir, opts, warn) : undefined;
    const support = yield* supportLibrary(t, sources, cacheDir, opts, warn);
    const tmp = tempDir(cacheDir, key);
    let objects: ReturnType<typeof emulationObjects> | undefined;
    try {
      for (const [name, text] of Object.entries(sources.files)) fs.writeFileSync(path.join(tmp, name), text);
      const out = (f: string) => path.join(tmp, f);
      let stages: Job[][];
      if (t.kind === 'sdk') {
        stages = [
          [
            { cmd: t.popc, args: ['-O3', '--target', popcTargets(opts.device, t.sdk).join(','), out('codelets.cpp'), '-o', out('codelets.gp')], cwd: tmp, label: 'popc codelets.cpp' },
            ...hostUnits(sources.files).map((f): Job => ({ cmd: t.cxx, args: [...COMPILE_FLAGS.host, ...support.pch, '-c', out(f), '-o', out(f.replace(/\.cpp$/, '.o'))], cwd: tmp, label: f })),
          ],
          [{ cmd: t.cxx, args: [...hostUnits(sources.files).map((f) => out(f.replace(/\.cpp$/, '.o'))), support.lib, '-o', out('step'), '-lpoplar', '-lpopops', '-lpoplin', '-lpopnn', '-lpoputil', '-lpoprand', gclLibrary(t.sdk)], cwd: tmp, label: 'link' }],
        ];
      } else {
        // the objects not in the cache compile in the build folder and the link follows in the same run
        objects = emulationObjects(t, sources, cacheDir, path.join(tmp, OBJECTS), lib!, support, warn);
        stages = [...objects.stages, [{ cmd: t.cxx, args: [...(t.linkFlags ?? []), ...objects.objects, support.lib, lib!.lib, '-lpthread', '-o', out('step')], cwd: tmp, label: 'link' }]];
      }
      runnerUsed = true;
      yield* runBuild(stages, `building ${JSON.stringify(sources.plan.module)}`, tmp, opts, 'compiling', runner);
      objects?.publish();
      fs.rmSync(path.join(tmp, OBJECTS), { recursive: true, force: true });
      for (const f of fs.readdirSync(tmp)) if (f.endsWith('.o')) fs.rmSync(path.join(tmp, f));
      sealEntry(tmp, { kind: 'executable', module: sources.plan.module, key, toolchain: t.kind, toolchainVersion: t.version, flags: COMPILE_FLAGS, sources: inputs.sources });
      publish(tmp, final, (d) => entryProblem(d, expect));
    } catch (e) {
      dropBuild(tmp);
      throw e;
    }
    touchEntry(final);
    autoPrune(cacheDir, [final, support.dir, ...(lib ? [lib.dir] : []), ...(objects?.dirs ?? [])], maxBytes);
    return result(false, missReason);
  } finally {
    if (!runnerUsed) stopJobsRunner(runner);
  }
}
