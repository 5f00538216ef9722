import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { DiagnosticError, error } from '@tilegraph/ir';

/**
 * The profile folder (Options.enableProfiling, or POPLAR_ENGINE_OPTIONS' autoReport.*): one
 * folder per model, `<dir>/<modelName>/`, holding
 *
 * - `compile.json` (format "tilegraph-compile-profile"): written by the runtime when the model
 *   is compiled — the compiler's memory plan, pass times, op counts and cycle estimates, and which
 *   stream handle carries which input or output;
 * - `profile.json` (format "poplar-host-profile"): written by the emulated engine (poplar-host)
 *   when it loads and rewritten after every run — memory per tile, the control program's steps,
 *   the compute sets with their estimated cycles, and the measurements of the runs.
 *
 * Both carry `format` and `version`; readers refuse other formats and newer versions. On the
 * Poplar SDK the same options make Poplar write its own profile.pop (for PopVision Graph
 * Analyser) into the folder instead of profile.json. See docs/report.md.
 */

export const COMPILE_PROFILE_FILE = 'compile.json';
export const ENGINE_PROFILE_FILE = 'profile.json';
export const COMPILE_PROFILE_FORMAT = 'tilegraph-compile-profile';
export const ENGINE_PROFILE_FORMAT = 'poplar-host-profile';
export const PROFILE_VERSION = 1;

// ---------------------------------------------------------------------------------------------
// profile.json (written by poplar-host's Engine: src/Profile.cpp)

export interface ProfileTransfer {
  readonly copies: number;
  readonly bytes: number;
  readonly seconds: number;
}

export interface ProfileStep {
  readonly id: number;
  /** sequence, execute, copy, streamToDevice, streamToHost, repeat, poplibs, call, ... */
  readonly kind: string;
  /** The compute set (execute), stream handle, PopLibs step, "src -> dst" of a copy, "x3" of a repeat. */
  readonly name: string;
  readonly computeSet?: number;
  /** Estimated cycles of one execution (execute and poplibs steps). */
  readonly estimatedCycles?: number;
  readonly children?: readonly number[];
}

export interface StepCount {
  readonly id: number;
  readonly executions: number;
  readonly seconds: number;
}

export interface ComputeSetCount extends StepCount {
  /** executions × the compute set's estimate. */
  readonly estimatedCycles: number;
}

/**
 * PopTorch's performance counters: timestamps (seconds from an arbitrary origin) of every copy of
 * every stream in one run — `input[i][k]`: input stream i (inputStreams[i]) requested for the
 * k-th time, `input_complete[i][k]`: that copy done; `output`, `output_complete` likewise.
 */
export interface PerfCounters {
  readonly inputStreams: readonly string[];
  readonly input: readonly (readonly number[])[];
  readonly input_complete: readonly (readonly number[])[];
  readonly outputStreams: readonly string[];
  readonly output: readonly (readonly number[])[];
  readonly output_complete: readonly (readonly number[])[];
}

export interface EngineRun {
  /** 1 for the engine's first run. */
  readonly run: number;
  readonly program: number;
  readonly seconds: number;
  readonly estimatedCycles: number;
  readonly steps: readonly StepCount[];
  readonly computeSets: readonly ComputeSetCount[];
  readonly hostToDevice: ProfileTransfer;
  readonly deviceToHost: ProfileTransfer;
  readonly perfCounters: PerfCounters;
}

export interface EngineExecution {
  readonly runs: number;
  /** Runs of each program (index: the program). */
  readonly programRuns: readonly number[];
  readonly seconds: number;
  readonly estimatedCycles: number;
  readonly totals: { readonly steps: readonly StepCount[]; readonly computeSets: readonly ComputeSetCount[] };
  /** writeTensor / readTensor / remote-buffer copies of the host between runs. */
  readonly hostAccess: { readonly writes: ProfileTransfer; readonly reads: ProfileTransfer };
  /** The latest runs (at most 1000), oldest first; historyDropped older ones are not listed. */
  readonly history: readonly { readonly run: number; readonly program: number; readonly seconds: number; readonly estimatedCycles: number }[];
  readonly historyDropped: number;
  readonly lastRun: EngineRun | null;
}

export interface EngineProfile {
  readonly format: typeof ENGINE_PROFILE_FORMAT;
  readonly version: number;
  readonly target: { readonly ipus: number; readonly tilesPerIpu: number; readonly bytesPerTile: number; readonly replicas: number; readonly clockHz: number };
  /** The engine options in effect (POPLAR_ENGINE_OPTIONS over the program's). */
  readonly options: Readonly<Record<string, string>>;
  /** One replica: bytes of each tile (ipus × tilesPerIpu), of which always live. */
  readonly memory: {
    readonly totalBytes: number;
    readonly peakBytes: number;
    readonly peakTile: number;
    readonly remoteBytesPerReplica: number;
    readonly tiles: readonly number[];
    readonly alwaysLive: readonly number[];
  };
  readonly computeSets: readonly { readonly id: number; readonly name: string; readonly vertices: number; readonly tiles: number; readonly estimatedCycles: number; readonly unestimatedVertices: number }[];
  readonly streams: readonly { readonly id: number; readonly handle: string; readonly direction: 'toDevice' | 'toHost'; readonly bytesPerCopy: number }[];
  /** The root step of each program. */
  readonly programs: readonly number[];
  readonly steps: readonly ProfileStep[];
  /** null when the engine only described the graph (autoReport.outputGraphProfile). */
  readonly execution: EngineExecution | null;
}

// ---------------------------------------------------------------------------------------------
// compile.json (written by the runtime: profile/compile.ts)

export interface CompileProfile {
  readonly format: typeof COMPILE_PROFILE_FORMAT;
  readonly version: number;
  /** The model (graph) name, the folder's model name (Options.modelName) and its kind. */
  readonly model: string;
  readonly modelName: string;
  readonly kind: 'training' | 'inference';
  readonly createdAt: string;
  /** Where the step runs: the compiled executable (emulated or SDK) or the reference interpreter. */
  readonly backend: string;
  readonly options: { readonly deviceIterations: number; readonly replicationFactor: number; readonly gradientAccumulation: number; readonly logCycleCount: boolean };
  /** Wall seconds of compile(): checks and passes, then the build and the executable's start. */
  readonly seconds: { readonly passes: number; readonly start: number };
  readonly passes: readonly { readonly pass: string; readonly ms: number; readonly ops?: number }[];
  /** Ops of each graph of the compiled module, by kind. */
  readonly graphs: readonly { readonly name: string; readonly executionsPerRun: number; readonly ops: number; readonly byKind: Readonly<Record<string, number>>; readonly estimatedCycles: number }[];
  /** The compiler's cycle estimate of one run (codegen-poplar's GC200 cost model) and its clock. */
  readonly estimate: { readonly cyclesPerRun: number; readonly clockHz: number; readonly byKind: readonly { readonly kind: string; readonly ops: number; readonly cycles: number }[] };
  /** The compiler's memory plan (compiled backend only): per IPU, the always-live bytes, the peak and the fullest tile. */
  readonly memory: {
    readonly ipus: number;
    readonly tilesPerIpu: number;
    readonly bytesPerTile: number;
    readonly maxTileBytes: number;
    readonly maxTile: number;
    readonly perIpu: readonly { readonly ipu: number; readonly alwaysLiveBytes: number; readonly peakLiveBytes: number; readonly remoteBytes: number; readonly maxTile: number; readonly maxTileBytes: number; readonly peakAt: string }[];
  } | null;
  /** The executable's stream handles (compiled backend only): in<i> and out<i>, the model's names. */
  readonly streams: readonly { readonly handle: string; readonly name: string; readonly kind: string }[];
}

// ---------------------------------------------------------------------------------------------
// Reading and checking

/** A problem with a profile file: a diagnostic naming the file and the place in it. */
function bad(file: string, where: string, what: string, notes: string[] = []): DiagnosticError {
  return new DiagnosticError(error(`${file}: ${where ? `${where}: ` : ''}${what}`, undefined, notes));
}

/** Structural checks of parsed JSON, each failure naming the file and the path in it. */
class Checker {
  constructor(readonly file: string) {}
  obj(v: unknown, at: string): Record<string, unknown> {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw bad(this.file, at, `expected an object, found ${describe(v)}`);
    return v as Record<string, unknown>;
  }
  num(o: Record<string, unknown>, key: string, at: string, opts: { int?: boolean; optional?: boolean } = {}): number {
    const v = o[key];
    if (v === undefined && opts.optional) return NaN;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || (opts.int && !Number.isInteger(v))) {
      throw bad(this.file, join(at, key), `expected a non-negative ${opts.int ? 'integer' : 'number'}, found ${describe(v)}`);
    }
    return v;
  }
  str(o: Record<string, unknown>, key: string, at: string): string {
    const v = o[key];
    if (typeof v !== 'string') throw bad(this.file, join(at, key), `expected a string, found ${describe(v)}`);
    return v;
  }
  arr(v: unknown, at: string): unknown[] {
    if (!Array.isArray(v)) throw bad(this.file, at, `expected a list, found ${describe(v)}`);
    return v;
  }
  nums(v: unknown, at: string): number[] {
    return this.arr(v, at).map((x, i) => {
      if (typeof x !== 'number' || !Number.isFinite(x) || x < 0) throw bad(this.file, `${at}[${i}]`, `expected a non-negative number, found ${describe(x)}`);
      return x;
    });
  }
  bool(o: Record<string, unknown>, key: string, at: string): boolean {
    const v = o[key];
    if (typeof v !== 'boolean') throw bad(this.file, join(at, key), `expected true or false, found ${describe(v)}`);
    return v;
  }
  /** The format and version fields: this format, a version this reader knows. */
  header(o: Record<string, unknown>, format: string): void {
    if (o['format'] !== format) throw bad(this.file, 'format', `expected "${format}", found ${describe(o['format'])}`, ['is this the right file of the profile folder?']);
    const v = this.num(o, 'version', '', { int: true });
    if (v > PROFILE_VERSION) throw bad(this.file, 'version', `version ${v} is newer than this tilegraph reads (${PROFILE_VERSION})`, ['update tilegraph to read it']);
  }
}

function join(at: string, key: string): string {
  return at ? `${at}.${key}` : key;
}

function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'an object';
  const s = JSON.stringify(v);
  return s.length > 40 ? `${s.slice(0, 37)}...` : s;
}

/** Parses a JSON file: a missing, unreadable or malformed file is a diagnostic naming it. */
export function readJsonFile(file: string, what: string): unknown {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw bad(file, '', code === 'ENOENT' ? `missing: the folder has no ${what}` : `cannot be read (${(e as Error).message})`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (e) {
    throw bad(file, '', `not valid JSON (${(e as Error).message})`, [`the ${what} may have been cut short or edited`]);
  }
}

function transfer(c: Checker, v: unknown, at: string): ProfileTransfer {
  const o = c.obj(v, at);
  return { copies: c.num(o, 'copies', at, { int: true }), bytes: c.num(o, 'bytes', at, { int: true }), seconds: c.num(o, 'seconds', at) };
}

function counts(c: Checker, v: unknown, at: string, steps: number): StepCount[] {
  return c.arr(v, at).map((x, i) => {
    const p = `${at}[${i}]`;
    const o = c.obj(x, p);
    const id = c.num(o, 'id', p, { int: true });
    if (id >= steps) throw bad(c.file, `${p}.id`, `step ${id} does not exist (the profile has ${steps})`);
    return { id, executions: c.num(o, 'executions', p, { int: true }), seconds: c.num(o, 'seconds', p) };
  });
}

function csCounts(c: Checker, v: unknown, at: string, known: ReadonlySet<number>): ComputeSetCount[] {
  return c.arr(v, at).map((x, i) => {
    const p = `${at}[${i}]`;
    const o = c.obj(x, p);
    const id = c.num(o, 'id', p, { int: true });
    if (!known.has(id)) throw bad(c.file, `${p}.id`, `compute set ${id} is not among the profile's compute sets`);
    return { id, executions: c.num(o, 'executions', p, { int: true }), seconds: c.num(o, 'seconds', p), estimatedCycles: c.num(o, 'estimatedCycles', p) };
  });
}

function timestamps(c: Checker, o: Record<string, unknown>, key: string, at: string, streams: number): number[][] {
  const lists = c.arr(o[key], join(at, key)).map((x, i) => c.nums(x, `${join(at, key)}[${i}]`));
  if (lists.length !== streams) throw bad(c.file, join(at, key), `${lists.length} lists for ${streams} streams`);
  return lists;
}

function perfCounters(c: Checker, v: unknown, at: string): PerfCounters {
  const o = c.obj(v, at);
  const names = (key: string) => c.arr(o[key], join(at, key)).map((x, i) => c.str({ x }, 'x', `${join(at, key)}[${i}]`));
  const inputStreams = names('inputStreams');
  const outputStreams = names('outputStreams');
  const input = timestamps(c, o, 'input', at, inputStreams.length);
  const inputComplete = timestamps(c, o, 'input_complete', at, inputStreams.length);
  const output = timestamps(c, o, 'output', at, outputStreams.length);
  const outputComplete = timestamps(c, o, 'output_complete', at, outputStreams.length);
  return { inputStreams, input, input_complete: inputComplete, outputStreams, output, output_complete: outputComplete };
}

function engineRun(c: Checker, v: unknown, at: string, steps: number, cs: ReadonlySet<number>): EngineRun {
  const o = c.obj(v, at);
  return {
    run: c.num(o, 'run', at, { int: true }),
    program: c.num(o, 'program', at, { int: true }),
    seconds: c.num(o, 'seconds', at),
    estimatedCycles: c.num(o, 'estimatedCycles', at),
    steps: counts(c, o['steps'], join(at, 'steps'), steps),
    computeSets: csCounts(c, o['computeSets'], join(at, 'computeSets'), cs),
    hostToDevice: transfer(c, o['hostToDevice'], join(at, 'hostToDevice')),
    deviceToHost: transfer(c, o['deviceToHost'], join(at, 'deviceToHost')),
    perfCounters: perfCounters(c, o['perfCounters'], join(at, 'perfCounters')),
  };
}

function execution(c: Checker, v: unknown, steps: number, cs: ReadonlySet<number>): EngineExecution | null {
  if (v === null) return null;
  const at = 'execution';
  const o = c.obj(v, at);
  const totals = c.obj(o['totals'], `${at}.totals`);
  const host = c.obj(o['hostAccess'], `${at}.hostAccess`);
  const history = c.arr(o['history'], `${at}.history`).map((x, i) => {
    const p = `${at}.history[${i}]`;
    const h = c.obj(x, p);
    return { run: c.num(h, 'run', p, { int: true }), program: c.num(h, 'program', p, { int: true }), seconds: c.num(h, 'seconds', p), estimatedCycles: c.num(h, 'estimatedCycles', p) };
  });
  const runs = c.num(o, 'runs', at, { int: true });
  const lastRun = o['lastRun'] === null ? null : engineRun(c, o['lastRun'], `${at}.lastRun`, steps, cs);
  if ((lastRun === null) !== (runs === 0)) throw bad(c.file, `${at}.lastRun`, runs === 0 ? 'a last run, but no runs are counted' : `missing, but ${runs} runs are counted`);
  return {
    runs,
    programRuns: c.nums(o['programRuns'], `${at}.programRuns`),
    seconds: c.num(o, 'seconds', at),
    estimatedCycles: c.num(o, 'estimatedCycles', at),
    totals: { steps: counts(c, totals['steps'], `${at}.totals.steps`, steps), computeSets: csCounts(c, totals['computeSets'], `${at}.totals.computeSets`, cs) },
    hostAccess: { writes: transfer(c, host['writes'], `${at}.hostAccess.writes`), reads: transfer(c, host['reads'], `${at}.hostAccess.reads`) },
    history,
    historyDropped: c.num(o, 'historyDropped', at, { int: true }),
    lastRun,
  };
}

/** Reads and checks profile.json (see EngineProfile). */
export function readEngineProfile(file: string): EngineProfile {
  const c = new Checker(file);
  const o = c.obj(readJsonFile(file, `${ENGINE_PROFILE_FILE} (the emulated engine's profile)`), '');
  c.header(o, ENGINE_PROFILE_FORMAT);
  const t = c.obj(o['target'], 'target');
  const target = {
    ipus: c.num(t, 'ipus', 'target', { int: true }),
    tilesPerIpu: c.num(t, 'tilesPerIpu', 'target', { int: true }),
    bytesPerTile: c.num(t, 'bytesPerTile', 'target', { int: true }),
    replicas: c.num(t, 'replicas', 'target', { int: true }),
    clockHz: c.num(t, 'clockHz', 'target'),
  };
  const opts = c.obj(o['options'], 'options');
  const options: Record<string, string> = {};
  for (const k of Object.keys(opts)) options[k] = c.str(opts, k, 'options');
  const m = c.obj(o['memory'], 'memory');
  const memory = {
    totalBytes: c.num(m, 'totalBytes', 'memory', { int: true }),
    peakBytes: c.num(m, 'peakBytes', 'memory', { int: true }),
    peakTile: c.num(m, 'peakTile', 'memory', { int: true }),
    remoteBytesPerReplica: c.num(m, 'remoteBytesPerReplica', 'memory', { int: true }),
    tiles: c.nums(m['tiles'], 'memory.tiles'),
    alwaysLive: c.nums(m['alwaysLive'], 'memory.alwaysLive'),
  };
  const tiles = target.ipus * target.tilesPerIpu;
  if (memory.tiles.length !== tiles || memory.alwaysLive.length !== tiles) throw bad(file, 'memory.tiles', `${memory.tiles.length} tiles listed for a target of ${tiles}`);
  const computeSets = c.arr(o['computeSets'], 'computeSets').map((x, i) => {
    const p = `computeSets[${i}]`;
    const s = c.obj(x, p);
    return { id: c.num(s, 'id', p, { int: true }), name: c.str(s, 'name', p), vertices: c.num(s, 'vertices', p, { int: true }), tiles: c.num(s, 'tiles', p, { int: true }), estimatedCycles: c.num(s, 'estimatedCycles', p), unestimatedVertices: c.num(s, 'unestimatedVertices', p, { int: true }) };
  });
  const streams = c.arr(o['streams'], 'streams').map((x, i) => {
    const p = `streams[${i}]`;
    const s = c.obj(x, p);
    const direction = c.str(s, 'direction', p);
    if (direction !== 'toDevice' && direction !== 'toHost') throw bad(file, `${p}.direction`, `expected "toDevice" or "toHost", found ${describe(direction)}`);
    return { id: c.num(s, 'id', p, { int: true }), handle: c.str(s, 'handle', p), direction: direction as 'toDevice' | 'toHost', bytesPerCopy: c.num(s, 'bytesPerCopy', p, { int: true }) };
  });
  const rawSteps = c.arr(o['steps'], 'steps');
  const steps = rawSteps.map((x, i): ProfileStep => {
    const p = `steps[${i}]`;
    const s = c.obj(x, p);
    const id = c.num(s, 'id', p, { int: true });
    if (id !== i) throw bad(file, `${p}.id`, `expected ${i} (steps are listed by id)`);
    const children = s['children'] === undefined ? undefined : c.nums(s['children'], `${p}.children`);
    if (children?.some((k) => k >= rawSteps.length || !Number.isInteger(k))) throw bad(file, `${p}.children`, 'names a step that does not exist');
    const cs = c.num(s, 'computeSet', p, { int: true, optional: true });
    const est = c.num(s, 'estimatedCycles', p, { optional: true });
    return { id, kind: c.str(s, 'kind', p), name: c.str(s, 'name', p), ...(Number.isNaN(cs) ? {} : { computeSet: cs }), ...(Number.isNaN(est) ? {} : { estimatedCycles: est }), ...(children ? { children } : {}) };
  });
  const programs = c.nums(o['programs'], 'programs');
  if (programs.some((p) => p >= steps.length)) throw bad(file, 'programs', 'names a step that does not exist');
  const known = new Set(computeSets.map((x) => x.id));
  return { format: ENGINE_PROFILE_FORMAT, version: c.num(o, 'version', ''), target, options, memory, computeSets, streams, programs, steps, execution: execution(c, o['execution'], steps.length, known) };
}

/** Reads and checks compile.json (see CompileProfile). */
export function readCompileProfile(file: string): CompileProfile {
  const c = new Checker(file);
  const o = c.obj(readJsonFile(file, `${COMPILE_PROFILE_FILE} (the compile's profile)`), '');
  c.header(o, COMPILE_PROFILE_FORMAT);
  const kind = c.str(o, 'kind', '');
  if (kind !== 'training' && kind !== 'inference') throw bad(file, 'kind', `expected "training" or "inference", found ${describe(kind)}`);
  const opts = c.obj(o['options'], 'options');
  const secs = c.obj(o['seconds'], 'seconds');
  const est = c.obj(o['estimate'], 'estimate');
  const mem = o['memory'] === null ? null : c.obj(o['memory'], 'memory');
  return {
    format: COMPILE_PROFILE_FORMAT,
    version: c.num(o, 'version', ''),
    model: c.str(o, 'model', ''),
    modelName: c.str(o, 'modelName', ''),
    kind,
    createdAt: c.str(o, 'createdAt', ''),
    backend: c.str(o, 'backend', ''),
    options: {
      deviceIterations: c.num(opts, 'deviceIterations', 'options', { int: true }),
      replicationFactor: c.num(opts, 'replicationFactor', 'options', { int: true }),
      gradientAccumulation: c.num(opts, 'gradientAccumulation', 'options', { int: true }),
      logCycleCount: c.bool(opts, 'logCycleCount', 'options'),
    },
    seconds: { passes: c.num(secs, 'passes', 'seconds'), start: c.num(secs, 'start', 'seconds') },
    passes: c.arr(o['passes'], 'passes').map((x, i) => {
      const p = `passes[${i}]`;
      const s = c.obj(x, p);
      const ops = c.num(s, 'ops', p, { int: true, optional: true });
      return { pass: c.str(s, 'pass', p), ms: c.num(s, 'ms', p), ...(Number.isNaN(ops) ? {} : { ops }) };
    }),
    graphs: c.arr(o['graphs'], 'graphs').map((x, i) => {
      const p = `graphs[${i}]`;
      const g = c.obj(x, p);
      const byKind = c.obj(g['byKind'], `${p}.byKind`);
      return {
        name: c.str(g, 'name', p),
        executionsPerRun: c.num(g, 'executionsPerRun', p, { int: true }),
        ops: c.num(g, 'ops', p, { int: true }),
        byKind: Object.fromEntries(Object.keys(byKind).map((k) => [k, c.num(byKind, k, `${p}.byKind`, { int: true })])),
        estimatedCycles: c.num(g, 'estimatedCycles', p),
      };
    }),
    estimate: {
      cyclesPerRun: c.num(est, 'cyclesPerRun', 'estimate'),
      clockHz: c.num(est, 'clockHz', 'estimate'),
      byKind: c.arr(est['byKind'], 'estimate.byKind').map((x, i) => {
        const p = `estimate.byKind[${i}]`;
        const k = c.obj(x, p);
        return { kind: c.str(k, 'kind', p), ops: c.num(k, 'ops', p, { int: true }), cycles: c.num(k, 'cycles', p) };
      }),
    },
    memory: mem && {
      ipus: c.num(mem, 'ipus', 'memory', { int: true }),
      tilesPerIpu: c.num(mem, 'tilesPerIpu', 'memory', { int: true }),
      bytesPerTile: c.num(mem, 'bytesPerTile', 'memory', { int: true }),
      maxTileBytes: c.num(mem, 'maxTileBytes', 'memory', { int: true }),
      maxTile: c.num(mem, 'maxTile', 'memory', { int: true }),
      perIpu: c.arr(mem['perIpu'], 'memory.perIpu').map((x, i) => {
        const p = `memory.perIpu[${i}]`;
        const m = c.obj(x, p);
        return {
          ipu: c.num(m, 'ipu', p, { int: true }),
          alwaysLiveBytes: c.num(m, 'alwaysLiveBytes', p, { int: true }),
          peakLiveBytes: c.num(m, 'peakLiveBytes', p, { int: true }),
          remoteBytes: c.num(m, 'remoteBytes', p, { int: true }),
          maxTile: c.num(m, 'maxTile', p, { int: true }),
          maxTileBytes: c.num(m, 'maxTileBytes', p, { int: true }),
          peakAt: c.str(m, 'peakAt', p),
        };
      }),
    },
    streams: c.arr(o['streams'], 'streams').map((x, i) => {
      const p = `streams[${i}]`;
      const s = c.obj(x, p);
      return { handle: c.str(s, 'handle', p), name: c.str(s, 'name', p), kind: c.str(s, 'kind', p) };
    }),
  };
}

/** A model's profile folder, read and checked. */
export interface ProfileFolder {
  readonly dir: string;
  readonly compile: CompileProfile;
  readonly engine: EngineProfile;
}

/**
 * Reads a profile folder: `dir` itself when it holds compile.json or profile.json, else its one
 * model folder (`dir/<modelName>/`); with several, the one named `prefer` (the report's pipeline,
 * 'training' or 'inference'). Every problem is a diagnostic naming the file.
 */
export function readProfileFolder(dir: string, prefer?: string): ProfileFolder {
  let st: fs.Stats;
  try {
    st = fs.statSync(dir);
  } catch {
    throw new DiagnosticError(error(`${dir}: no such profile folder`, undefined, ['write one with Options.enableProfiling(dir), or tilegraph train/run --profile DIR']));
  }
  if (!st.isDirectory()) throw new DiagnosticError(error(`${dir}: not a folder (give the profile folder, which holds ${COMPILE_PROFILE_FILE} and ${ENGINE_PROFILE_FILE})`));
  const holds = (d: string) => fs.existsSync(path.join(d, COMPILE_PROFILE_FILE)) || fs.existsSync(path.join(d, ENGINE_PROFILE_FILE));
  let model = dir;
  if (!holds(dir)) {
    const subs = fs
      .readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory() && holds(path.join(dir, e.name)))
      .map((e) => e.name)
      .sort();
    if (subs.length === 0) throw new DiagnosticError(error(`${dir}: not a profile folder: neither it nor a folder in it holds ${COMPILE_PROFILE_FILE} or ${ENGINE_PROFILE_FILE}`));
    const pick = subs.length === 1 ? subs[0] : subs.find((s) => s === prefer);
    if (pick === undefined) throw new DiagnosticError(error(`${dir} holds the profiles of several models: ${subs.join(', ')}`, undefined, [`give one of them: ${path.join(dir, subs[0]!)}`]));
    model = path.join(dir, pick);
  }
  const compile = readCompileProfile(path.join(model, COMPILE_PROFILE_FILE));
  const engineFile = path.join(model, ENGINE_PROFILE_FILE);
  if (!fs.existsSync(engineFile) && fs.existsSync(path.join(model, 'profile.pop'))) {
    throw new DiagnosticError(
      error(`${engineFile}: missing: the run was on the Poplar SDK, which wrote profile.pop instead`, undefined, ['open profile.pop with PopVision Graph Analyser; tilegraph reads the emulated engine\'s profile.json']),
    );
  }
  return { dir: model, compile, engine: readEngineProfile(engineFile) };
}

/** Writes a JSON file whole: a temporary file in the same folder, renamed over it. */
export function writeJsonAtomic(file: string, value: unknown): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    fs.writeFileSync(tmp, JSON.stringify(value, null, 1) + '\n');
    fs.renameSync(tmp, file);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
}
