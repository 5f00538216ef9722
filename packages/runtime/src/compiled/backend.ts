import * as fs from 'node:fs';
import {
  DType,
  DiagnosticError,
  Module,
  ProgramNode,
  Tensor,
  VariableInfo,
  error,
  float32ToHalfBits,
  formatShape,
  formatType,
  getOpDef,
  halfBitsToFloat,
  isInitSpec,
  materializeInit,
  numElements,
  Pausable,
  runToEnd,
  shapesEqual,
  shardOfTensor,
} from '@tilegraph/ir';
import { BuildPlan, DeviceChoice, GenerateOptions, generatePoplarSteps } from '@tilegraph/codegen-poplar';
import { ConnectionType, SyncPattern, type Options } from '@tilegraph/frontend';
import { Backend, BackendCacheStatus, BackendFactory, BackendOptions, OutputListener } from '../session/backend.js';
import { BuildOptions, BuiltExecutable, buildExecutableSteps, mpiLibrarySteps } from './build.js';
import { DistributedProcess, ProcessReplicasBackend, distributedEnv } from './distributed.js';
import { findToolchain } from './toolchain.js';
import { stderrWarning } from './cache.js';
import { ChildProcessError, FeedListener, HostCallListener, SyncProcess } from './sync.js';
import { CpuCallAnswers } from './cpu-calls.js';
import { InputFile } from './input-file.js';
import { Waiting, driveAsync, driveSync } from './drive.js';

/**
 * The compiled backend: the Module's generated Poplar program, built for the SDK or the
 * emulation, running as a child process that the session drives over the stdin/stdout
 * protocol of the code generator. It keeps no copy of the state: reads and writes go to the
 * device.
 */

export interface CompiledBackendOptions extends GenerateOptions, BuildOptions {
  /** Longest wait for one answer of the executable (Options.executableTimeout; default 10 minutes). */
  stepTimeoutMs?: number;
  /** This process of a run over several (Options.Distributed): see distributed.ts. */
  distributed?: DistributedProcess;
}

/** What a compiled backend runs: a built executable and the initial values of its state. */
export interface ExecutableImage {
  readonly dir: string;
  readonly executable: string;
  readonly args: readonly string[];
  readonly plan: BuildPlan;
  readonly initial: ReadonlyMap<string, Tensor>;
  /** Whether a build found the executable in the cache, and why not (absent for exported executables). */
  readonly cached?: boolean;
  readonly missReason?: string;
}

const encoder = new TextEncoder();

/**
 * Device bytes of a tensor (float16 as IEEE half bits, bool as bytes, narrow integers at their
 * width), little-endian. For 32-bit types held in their own typed array this is a view of the
 * tensor's memory, not a copy (a large model's state is exported and loaded without copying it):
 * read it, do not write to it.
 */
export function tensorBytes(t: Tensor): Uint8Array {
  switch (t.dtype) {
    case 'float16': {
      const h = new Uint16Array(t.size);
      for (let i = 0; i < t.size; i++) h[i] = float32ToHalfBits(t.data[i]!);
      return new Uint8Array(h.buffer);
    }
    case 'float32':
      return bytesOf(t.data instanceof Float32Array ? t.data : Float32Array.from(t.data));
    case 'int32':
      return bytesOf(t.data instanceof Int32Array ? t.data : Int32Array.from(t.data));
    case 'uint32':
      return bytesOf(t.data instanceof Uint32Array ? t.data : Uint32Array.from(t.data));
    case 'bool':
      return Uint8Array.from(t.data, (x) => (x ? 1 : 0));
    case 'int8':
      return new Uint8Array(Int8Array.from(t.data).buffer);
    case 'uint8':
      return Uint8Array.from(t.data);
    case 'int16':
      return new Uint8Array(Int16Array.from(t.data).buffer);
    case 'uint16':
      return new Uint8Array(Uint16Array.from(t.data).buffer);
    default:
      throw new DiagnosticError(error(`${t.dtype} tensors cannot be sent to the device`));
  }
}

const bytesOf = (a: ArrayBufferView): Uint8Array => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

export function bytesPerElement(t: DType): number {
  return t === 'float16' || t === 'int16' || t === 'uint16' ? 2 : t === 'bool' || t === 'int8' || t === 'uint8' ? 1 : 4;
}

/** A tensor from device bytes. */
export function tensorFromBytes(dtype: DType, shape: readonly number[], bytes: Uint8Array): Tensor {
  const n = numElements(shape);
  const copy = bytes.slice(0, n * bytesPerElement(dtype));
  switch (dtype) {
    case 'float16': {
      const h = new Uint16Array(copy.buffer);
      const out = new Float32Array(n);
      for (let i = 0; i < n; i++) out[i] = halfBitsToFloat(h[i]!);
      return new Tensor(dtype, shape, out);
    }
    case 'float32':
      return new Tensor(dtype, shape, new Float32Array(copy.buffer));
    case 'int32':
      return new Tensor(dtype, shape, new Int32Array(copy.buffer));
    case 'uint32':
      return new Tensor(dtype, shape, new Uint32Array(copy.buffer));
    case 'bool':
      return new Tensor(dtype, shape, copy);
    // the host keeps narrow integers in Int32Array (see the IR's dtype.ts)
    case 'int8':
      return new Tensor(dtype, shape, Int32Array.from(new Int8Array(copy.buffer)));
    case 'uint8':
      return new Tensor(dtype, shape, Int32Array.from(copy));
    case 'int16':
      return new Tensor(dtype, shape, Int32Array.from(new Int16Array(copy.buffer)));
    case 'uint16':
      return new Tensor(dtype, shape, Int32Array.from(new Uint16Array(copy.buffer)));
    default:
      throw new Error(`no device type ${dtype}`);
  }
}

/** A "write" command for a state handle: its line and the bytes (joined once, when the request is copied for the writer). */
function writeCommand(handle: string, parts: readonly Uint8Array[]): Uint8Array[] {
  const bytes = parts.reduce((n, p) => n + p.length, 0);
  return [encoder.encode(`write ${handle} ${bytes}\n`), ...parts];
}

/** The reference's scrambling of the run seed (murmur3 finaliser), as ops/random.ts does it. */
function mixSeed(seed: number): number {
  let h = seed >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * Initial values of the module's state, as the reference interpreter starts from them: whole
 * tensors (a sharded variable's replicas each take their part when it is loaded).
 */
export function initialState(m: Module): Map<string, Tensor> {
  return runToEnd(initialStateSteps(m));
}

/** initialState, pausing after each variable (drawing a large random initialisation takes a while). */
export function* initialStateSteps(m: Module): Pausable<Map<string, Tensor>> {
  const out = new Map<string, Tensor>();
  for (const v of m.variables.values()) {
    out.set(v.name, initialValue(v));
    yield;
  }
  return out;
}

/** The initial value of one of a module's variables (whole, when it is sharded). */
export function initialValue(v: VariableInfo): Tensor {
  const type = v.location?.sharded?.whole ?? v.type;
  const t = isInitSpec(v.init) ? materializeInit(v.init, type.dtype, type.shape) : (v.init as Tensor);
  return t.dtype !== type.dtype ? Tensor.from(type.dtype, type.shape, t.data) : t;
}

/** Turns a failure of the executable into a diagnostic with its stderr. */
function asDiagnostic(e: unknown, what: string): never {
  if (e instanceof ChildProcessError) {
    const lines = e.stderr.trim().split('\n').filter((l) => l.trim() !== '');
    const shown = lines.length > 40 ? [...lines.slice(0, 10), `... (${lines.length - 30} lines)`, ...lines.slice(-20)] : lines;
    const oom = lines.find((l) => /Out of memory on tile/.test(l));
    const hung = /did not answer within/.test(e.message) ? ['if the step is just slow, allow it longer: Options.executableTimeout(seconds) or --timeout <seconds>'] : [];
    const notes = [...hung, ...(oom ? ['the program does not fit in tile memory: try setAvailableMemoryProportion, serializedMatMul, recomputation or more IPUs'] : []), ...shown.map((l) => `executable: ${l}`)];
    throw new DiagnosticError(error(`${what}: ${e.message}`, undefined, notes));
  }
  throw e;
}

/** Options of a started executable. */
export type StartOptions = BackendOptions & { stepTimeoutMs?: number; profileSummaryFile?: string; extraEnv?: Readonly<Record<string, string>> };

/** The executable's environment: Node's, with the engine options and the profile summary's file when given. */
function processEnv(opts: StartOptions): NodeJS.ProcessEnv | undefined {
  if (!opts.profileSummaryFile && !opts.engineOptions && !opts.extraEnv) return undefined;
  return {
    ...process.env,
    ...opts.extraEnv,
    ...(opts.profileSummaryFile ? { POPLAR_HOST_PROFILE_SUMMARY: opts.profileSummaryFile } : {}),
    ...(opts.engineOptions ? { POPLAR_ENGINE_OPTIONS: JSON.stringify(opts.engineOptions) } : {}),
  };
}

/** Set by startSteps: the constructor then leaves loading the initial state to it. */
const deferLoad: unique symbol = Symbol('deferLoad');

export class CompiledBackend implements Backend {
  readonly kind = 'compiled';
  /** runSteps joins the inputs' bytes into the command before its first wait. */
  readonly copiesInputsAtOnce = true;
  readonly plan: BuildPlan;
  /** Whether the build came from the executable cache (and why not): see Backend.cache. */
  readonly cache: BackendCacheStatus | undefined;
  private readonly proc: SyncProcess;
  /** Where runs write their inputs, when the executable has mapped it (see input-file.ts). */
  private inputFile: InputFile | undefined;
  private readonly timeoutMs: number;
  private readonly print: (line: string) => void;
  private readonly R: number;
  private readonly profileFile: string | undefined;

  /** Starts the executable and loads its initial state (blocking until it is loaded). */
  constructor(
    readonly image: ExecutableImage,
    opts: StartOptions = {},
  ) {
    this.profileFile = opts.profileSummaryFile;
    this.plan = image.plan;
    this.cache = image.cached === undefined ? undefined : { hit: image.cached, ...(image.missReason !== undefined ? { reason: image.missReason } : {}) };
    this.R = image.plan.replicationFactor;
    this.timeoutMs = opts.stepTimeoutMs ?? 10 * 60 * 1000;
    this.print = opts.print ?? ((l) => console.log(l));
    this.proc = new SyncProcess(image.executable, image.args, image.dir, processEnv(opts));
    if (!(opts as { [deferLoad]?: boolean })[deferLoad]) driveSync(this.loadInitialState(opts.seed));
  }

  /** The constructor as Waiting work (see drive.ts). */
  static *startSteps(image: ExecutableImage, opts: StartOptions = {}): Waiting<CompiledBackend> {
    const b = new CompiledBackend(image, { ...opts, [deferLoad]: true } as StartOptions);
    yield* b.loadInitialState(opts.seed);
    return b;
  }

  private *loadInitialState(seed: number | undefined): Waiting<void> {
    try {
      for (const s of this.plan.state) {
        if (s.storage === 'transient') continue; // rebuilt by the program before every use
        const t = this.image.initial.get(s.name);
        if (!t) throw new DiagnosticError(error(`no initial value for '${s.name}'`));
        const shard = s.shard;
        if (shard) {
          yield* this.command(writeCommand(s.handle, shard.rank.map((k) => tensorBytes(shardOfTensor(t, shard.parts, k)))), 'loading the weights');
        } else yield* this.command(this.writeAllParts(s.handle, tensorBytes(t)), 'loading the weights');
      }
      if (this.plan.random) {
        const seeds = new Uint32Array(this.R);
        for (let r = 0; r < this.R; r++) seeds[r] = mixSeed((seed ?? 0) + r * 0x9e3779b1);
        yield* this.command([encoder.encode(`write seed ${seeds.byteLength}\n`), new Uint8Array(seeds.buffer)], 'setting the random seed');
        const zero = new Uint8Array(4 * this.R);
        yield* this.command([encoder.encode(`write step ${zero.length}\n`), zero], 'setting the random seed');
      }
      yield* this.openInputFile();
    } catch (e) {
      this.proc.kill();
      this.inputFile?.close();
      throw e;
    }
  }

  /** Offers the executable a file for the runs' inputs, when they are large enough to gain by it. */
  private *openInputFile(): Waiting<void> {
    const R = this.R;
    const bytes = this.plan.inputs.reduce((a, s) => a + s.perRun * R * numElements(s.shape) * bytesPerElement(s.dtype), 0);
    const file = InputFile.create(bytes);
    if (!file) return;
    try {
      const answer = yield* this.command([encoder.encode(`inputs ${file.path}\n`)], 'starting');
      if (answer.payload[0] === 1) this.inputFile = file;
      else file.close();
    } finally {
      file.unlink();
    }
  }

  /** Generates, builds (or finds in the cache) and starts the executable for a module. */
  static compile(module: Module, opts: CompiledBackendOptions & StartOptions = {}): Backend {
    return driveSync(CompiledBackend.compileSteps(module, opts));
  }

  /** compile() as Waiting work (see drive.ts). */
  static *compileSteps(module: Module, opts: CompiledBackendOptions & StartOptions = {}): Waiting<Backend> {
    const built = yield* compileModuleSteps(module, opts);
    if (opts.device?.kind === 'offline') return new OfflineBackend(built);
    const initial = yield* initialStateSteps(module);
    const d = opts.distributed;
    if (!d || d.processes < 2) return yield* CompiledBackend.startSteps({ ...built, initial }, opts);
    const mpi = yield* mpiLibrarySteps(opts);
    // the build key covers the generated program: processes that differ in model or options differ in it
    const extraEnv = { ...opts.extraEnv, ...distributedEnv(d, mpi.lib, `${built.key.slice(0, 32)}/${d.processes}`) };
    const b = yield* CompiledBackend.startSteps({ ...built, initial }, { ...opts, extraEnv });
    return new ProcessReplicasBackend(b, d, module.replicationFactor);
  }

  /** Sends a command (its parts are copied at once: the caller may change them afterwards). */
  private *command(parts: Uint8Array[], what: string, onFeed?: FeedListener, onCall?: HostCallListener): Waiting<{ sizes: number[]; payload: Uint8Array }> {
    try {
      return yield* this.proc.requestSteps(parts, this.timeoutMs, onFeed, onCall);
    } catch (e) {
      asDiagnostic(e, `the compiled program failed while ${what}`);
    }
  }

  private commandSync(parts: Uint8Array[], what: string): { sizes: number[]; payload: Uint8Array } {
    return driveSync(this.command(parts, what));
  }

  /**
   * The emulated engine's profile summary (its memory per tile), when the backend was started
   * with `profileSummaryFile`: poplar-host writes it there when the engine loads. The Poplar SDK
   * writes no such file.
   */
  profileSummary(): string {
    if (!this.profileFile) throw new Error('profileSummary: start the backend with profileSummaryFile');
    return fs.readFileSync(this.profileFile, 'utf8');
  }

  /** The command writing the same value to every replica. */
  private writeAllParts(handle: string, one: Uint8Array): Uint8Array[] {
    return writeCommand(handle, Array.from({ length: this.R }, () => one));
  }

  private stateInfo(name: string) {
    const s = this.plan.state.find((x) => x.name === name);
    if (!s) throw new DiagnosticError(error(`no parameter or variable named '${name}'`));
    if (s.storage === 'transient') throw new DiagnosticError(error(`'${name}' is a working copy the program rebuilds before every use: the host cannot read or write it`));
    return s;
  }

  run(streams: Readonly<Record<string, readonly Tensor[]>>): Record<string, Tensor[]> {
    return driveSync(this.runSteps(streams));
  }

  /** run() without blocking the event loop while the executable computes. */
  runAsync(streams: Readonly<Record<string, readonly Tensor[]>>): Promise<Record<string, Tensor[]>> {
    return driveAsync(this.runSteps(streams));
  }

  /** runAsync() handing each output copy to `onOutput` as the executable produces it (a "runfeed"). */
  runFed(streams: Readonly<Record<string, readonly Tensor[]>>, onOutput: OutputListener): Promise<Record<string, Tensor[]>> {
    return driveAsync(this.runSteps(streams, onOutput));
  }

  private *runSteps(streams: Readonly<Record<string, readonly Tensor[]>>, onOutput?: OutputListener): Waiting<Record<string, Tensor[]>> {
    const R = this.R;
    const sizes: number[] = [];
    const payloads: Uint8Array[] = [];
    for (const s of this.plan.inputs) {
      const need = s.perRun * R;
      if (need === 0) {
        sizes.push(0);
        continue;
      }
      const list = streams[s.name];
      if (!list) throw new DiagnosticError(error(`no data was given for input '${s.name}'`));
      if (list.length < need) throw new DiagnosticError(error(`input '${s.name}' ran out of data after ${list.length} micro-batches`));
      let bytes = 0;
      for (let k = 0; k < need; k++) {
        const t = list[k]!;
        if (t.dtype !== s.dtype || !shapesEqual(t.shape, s.shape)) {
          throw new DiagnosticError(error(`input '${s.name}' expects ${formatType(s)} but was given ${t.dtype}${formatShape(t.shape)}`));
        }
        // views of the caller's tensors where they can be: copied once, into the input file or the request
        const b = tensorBytes(t);
        payloads.push(b);
        bytes += b.length;
      }
      sizes.push(bytes);
    }
    // the inputs through the mapped file when it takes them (a file that fails is given up), else after the command on the pipe
    const mapped = this.inputFile?.write(payloads) ?? false;
    if (!mapped) this.inputFile = undefined;
    else payloads.length = 0;
    const via = mapped ? 'mapped' : '';
    let line = `run${via} ${sizes.join(' ')}`;
    let onFeed: FeedListener | undefined;
    if (onOutput) {
      // each output copy as it is produced: the bytes of one copy on one replica per stream
      const per = this.plan.outputs.map((o) => numElements(o.shape) * bytesPerElement(o.dtype));
      line = `runfeed${via} ${[...sizes, ...per].join(' ')}`;
      const seen = this.plan.outputs.map(() => new Array<number>(R).fill(0));
      onFeed = (stream, replica, payload) => {
        const o = this.plan.outputs[stream];
        if (!o || replica >= R || payload.length !== per[stream]) throw new DiagnosticError(error(`the executable sent an output copy that fits no output stream (stream ${stream}, replica ${replica}, ${payload.length} bytes)`));
        const index = seen[stream]![replica]!++;
        if (o.kind === 'output') onOutput(o.name, replica, index, tensorFromBytes(o.dtype, o.shape, payload));
      };
    }
    const cpuCalls = new CpuCallAnswers(this.plan.hostFunctions ?? [], R);
    const answer = yield* this.command([encoder.encode(line.trimEnd() + '\n'), ...payloads], 'running a step', onFeed, cpuCalls.listener);
    cpuCalls.finish();
    if (answer.sizes.length !== this.plan.outputs.length) {
      throw new DiagnosticError(error(`the executable returned ${answer.sizes.length} streams but the plan has ${this.plan.outputs.length}`));
    }
    // split each output stream into its copies, replica fastest
    const chunks: Tensor[][] = [];
    let offset = 0;
    this.plan.outputs.forEach((o, i) => {
      const n = answer.sizes[i]!;
      const per = numElements(o.shape) * bytesPerElement(o.dtype);
      const count = o.perRun * R;
      const list: Tensor[] = [];
      for (let k = 0; k < count; k++) list.push(tensorFromBytes(o.dtype, o.shape, answer.payload.subarray(offset + k * per, offset + (k + 1) * per)));
      chunks.push(list);
      offset += n;
    });
    const out: Record<string, Tensor[]> = {};
    this.plan.outputs.forEach((o, i) => {
      if (o.kind === 'output' && o.perRun > 0) out[o.name] = chunks[i]!;
    });
    if (this.plan.outputs.some((o) => o.kind === 'print')) this.replayPrints(chunks);
    return out;
  }

  /** Prints what ipu_print_tensor saw, in the reference's order (execution, replica, op). */
  private replayPrints(chunks: Tensor[][]): void {
    const printOp = getOpDef('ipu_print_tensor')!;
    const seen = new Map<number, number>();
    const ctx = { seed: 0, step: 0, print: this.print };
    const visit = (p: ProgramNode): void => {
      switch (p.kind) {
        case 'sequence':
          p.body.forEach(visit);
          return;
        case 'repeat':
          for (let i = 0; i < p.count; i++) visit(p.body);
          return;
        case 'execute': {
          const streams = this.plan.prints[p.graph] ?? [];
          for (let r = 0; r < this.R; r++) {
            for (const s of streams) {
              const k = seen.get(s) ?? 0;
              const o = this.plan.outputs[s]!;
              printOp.kernel([chunks[s]![k * this.R + r]!], { title: o.title ?? '' }, ctx);
            }
          }
          for (const s of streams) seen.set(s, (seen.get(s) ?? 0) + 1);
          return;
        }
        default:
          return;
      }
    };
    visit(this.plan.program);
  }

  read(name: string): Tensor[] {
    const s = this.stateInfo(name);
    const a = this.commandSync([encoder.encode(`read ${s.handle}\n`)], `reading '${name}'`);
    return Array.from({ length: this.R }, (_, r) => tensorFromBytes(s.dtype, s.shape, a.payload.subarray(r * s.bytes, (r + 1) * s.bytes)));
  }

  write(name: string, value: Tensor, replicas?: readonly number[]): void {
    const s = this.stateInfo(name);
    if (value.dtype !== s.dtype || !shapesEqual(value.shape, s.shape)) {
      throw new DiagnosticError(error(`'${name}' is ${formatType(s)}; cannot write ${value.dtype}${formatShape(value.shape)}`));
    }
    if (!replicas) {
      this.commandSync(this.writeAllParts(s.handle, tensorBytes(value)), `writing '${name}'`);
      return;
    }
    const current = this.read(name);
    for (const r of replicas) current[r] = value;
    this.commandSync(writeCommand(s.handle, current.map(tensorBytes)), `writing '${name}'`);
  }

  randomCounter(): number {
    if (!this.plan.random) return 0;
    const a = this.commandSync([encoder.encode('read step\n')], 'reading the random counter');
    return new DataView(a.payload.buffer, a.payload.byteOffset, 4).getUint32(0, true);
  }

  setRandomCounter(counter: number): void {
    if (!this.plan.random) return;
    if (!Number.isInteger(counter) || counter < 0 || counter > 0xffffffff) throw new DiagnosticError(error(`the random counter must be an integer in [0, 2^32), got ${counter}`));
    // every replica counts the same runs
    const all = new Uint32Array(this.R).fill(counter);
    this.commandSync([encoder.encode(`write step ${all.byteLength}\n`), new Uint8Array(all.buffer)], 'setting the random counter');
  }

  /** Stops the executable (at once if a request is waiting for its answer). */
  /** Ends the executable: "quit", then a kill if it has not exited within `timeoutMs` (default 10 s). */
  dispose(timeoutMs?: number): void {
    this.proc.close(timeoutMs);
    this.inputFile?.close();
    this.inputFile = undefined;
  }
}

/**
 * A program compiled for an offline IPU target (useOfflineIpuTarget, connectionType Never): it is
 * built, so compile errors and the executable are real, but there is no device to run it on.
 */
export class OfflineBackend implements Backend {
  readonly kind = 'offline';
  readonly cache: BackendCacheStatus;
  constructor(readonly built: BuiltExecutable) {
    this.cache = { hit: built.cached, ...(built.missReason !== undefined ? { reason: built.missReason } : {}) };
  }
  private refuse(what: string): never {
    throw new DiagnosticError(
      error(`cannot ${what}: the model was compiled for an offline IPU target (connectionType Never), with no device to run on`, undefined, [
        'drop useOfflineIpuTarget / connectionType(Never) to run it; the executable is in the cache: ' + this.built.dir,
      ]),
    );
  }
  run(): Record<string, Tensor[]> {
    return this.refuse('run');
  }
  read(name: string): Tensor[] {
    return this.refuse(`read '${name}' from the device`);
  }
  write(name: string): void {
    this.refuse(`write '${name}' to the device`);
  }
  randomCounter(): number {
    return this.refuse('read the random-number state');
  }
  setRandomCounter(): void {
    this.refuse('set the random-number state');
  }
}

/** Generates and builds the executable of a module (through the cache). */
export function compileModule(module: Module, opts: CompiledBackendOptions = {}): BuiltExecutable {
  return driveSync(compileModuleSteps(module, opts));
}

/** compileModule as Waiting work: pauses between the stages of code generation, waits for the build. */
export function* compileModuleSteps(module: Module, opts: CompiledBackendOptions = {}): Waiting<BuiltExecutable> {
  const sources = yield* generatePoplarSteps(module, opts);
  // each process attaches the IPUs of its own replicas
  checkDeviceSize(sources.plan.ipus, sources.plan.replicationFactor / (opts.distributed?.processes ?? 1), opts);
  yield;
  return yield* buildExecutableSteps(sources, opts);
}

/** A backend factory running modules compiled with the given options (startAsync builds without blocking). */
export function compiledBackendWith(opts: CompiledBackendOptions = {}): BackendFactory {
  return Object.assign((module: Module, bopts: BackendOptions) => CompiledBackend.compile(module, { ...opts, ...bopts }), {
    startAsync: (module: Module, bopts: BackendOptions, signal?: AbortSignal) => driveAsync(CompiledBackend.compileSteps(module, { ...opts, ...bopts }), signal),
  });
}

/** The compiled backend with default options (the emulation unless popc is on PATH). */
export const compiledBackend: BackendFactory = compiledBackendWith();

/** The compile options a PopTorch-style Options object asks for. */
export function compileOptionsFrom(options: Options): CompiledBackendOptions {
  const perIpu: Record<number, number> = {};
  for (let i = 0; i < 64; i++) {
    const p = options.availableMemoryProportionFor(i);
    if (p !== undefined) perIpu[i] = p;
  }
  return {
    ...(options.executable_cache_dir !== undefined ? { cacheDir: options.executable_cache_dir } : {}),
    showProgress: options.show_compilation_progress_bar,
    stepTimeoutMs: options.executable_timeout * 1000,
    availableMemoryProportionPerIpu: perIpu,
    partialsType: options.Precision.partials_type,
    stochasticRounding: options.Precision.stochastic_rounding,
    floatingPointExceptions: options.Precision.floating_point_exceptions,
    sourceLocationExcludes: options.source_location_excludes,
    outline: options.enable_outlining,
    ...(options.TensorLocations.num_io_tiles !== undefined ? { ioTiles: options.TensorLocations.num_io_tiles } : {}),
    device: deviceChoiceFrom(options),
    ...(options.Distributed.numProcesses > 1 ? { distributed: { processId: options.Distributed.processId, processes: options.Distributed.numProcesses } } : {}),
  };
}

/**
 * IPU systems hand out devices of a power of two IPUs: IPUs × replicas must be one, or be
 * rounded up to one (autoRoundNumIPUs), as PopTorch requires. For the SDK it is an error; the
 * emulation can run any number, so there it is a warning that the model would not run on IPUs.
 */
function checkDeviceSize(ipus: number, replicas: number, opts: CompiledBackendOptions): void {
  const n = ipus * replicas;
  if ((n & (n - 1)) === 0 || opts.device?.autoRoundNumIpus || opts.device?.kind === 'ipu-model') return;
  const message = `${ipus} IPU${ipus === 1 ? '' : 's'} × ${replicas} replica${replicas === 1 ? '' : 's'} = ${n} IPUs, but IPU devices come in powers of two`;
  const fix = `set Options().autoRoundNumIPUs(true) to request ${2 ** Math.ceil(Math.log2(n))} IPUs (the rest stay idle), or change the placement or replication factor`;
  let sdk = false;
  try {
    sdk = findToolchain(opts.toolchain ?? 'auto').kind === 'sdk';
  } catch {
    // no toolchain: the build says so
  }
  if (sdk) throw new DiagnosticError(error(message, undefined, [fix]));
  (opts.warn ?? stderrWarning)(`${message}: the emulation runs it, an IPU system would not (${fix})`);
}

/** The device the options ask for: useIpuModel, useOfflineIpuTarget / connectionType(Never), useIpuId, autoRoundNumIPUs, syncPattern. */
export function deviceChoiceFrom(options: Options): DeviceChoice {
  const kind = options.use_model ? 'ipu-model' : options.connection_type === ConnectionType.Never ? 'offline' : 'ipu';
  const sync = ({ [SyncPattern.Full]: 'full', [SyncPattern.SinglePipeline]: 'single_pipeline', [SyncPattern.ReplicaAndLadder]: 'replica_and_ladder' } as const)[options.sync_pattern];
  return {
    kind,
    arch: options.ipu_version === 1 ? 'ipu1' : 'ipu2',
    autoRoundNumIpus: options.auto_round_num_ipus,
    ...(options.ipu_id !== undefined ? { ipuId: options.ipu_id } : {}),
    ...(sync !== 'full' ? { syncPattern: sync } : {}),
  };
}

/** A backend factory honouring an Options object (cache folder, progress bar, memory, partials). */
export function compiledBackendFor(options: Options, extra: CompiledBackendOptions = {}): BackendFactory {
  return compiledBackendWith({ ...compileOptionsFrom(options), ...extra });
}
