import {
  CommGroup,
  DiagnosticError,
  Graph,
  Module,
  Tensor,
  TensorType,
  VariableInfo,
  Diagnostic,
  error,
  printGraph,
  renderDiagnostic,
  warning,
  groupOfReplica,
  hostVariables,
} from '@tilegraph/ir';
import { Options, OutputMode } from '@tilegraph/frontend';
import { PassManagerOptions, PassTiming, StepSettings } from '@tilegraph/passes';
import { Backend, BackendCacheStatus, BackendFactory, BackendOptions, ReferenceBackend, referenceBackend } from './backend.js';
import { Outfeed, feedFinished, feedRun, outfeedListener } from './outfeed.js';
import { findToolchain } from '../compiled/toolchain.js';
import { CompiledBackend, compiledBackendFor } from '../compiled/backend.js';
import { ProcessReplicasBackend, checkDistributedRun } from '../compiled/distributed.js';
import { Waiting, driveAsync, driveSync } from '../compiled/drive.js';
import { OutputSelection, RunLayout, microBatchesPerRun, selectOutputs, splitBatch, streamForReplicas } from './io.js';
import { LabelCheck, RunInputs, checkLabels, labelChecksOf, noInputs, runInputTensors } from './inputs.js';
import { WeightGrouping, asDiagnostic, commGroup, compiledOptions, optionsWithoutEffect, stepSettingsFrom } from './settings.js';
import { ModelProfile } from './profiling.js';
import { readReplicas, readVariable, variableInfo, wholeValues, writeReplicas, writeVariable } from './device-state.js';
import { bufferNames } from './graph.js';
import { ModelLog, limitRepeats, logLevel } from './log.js';
import { RandomState, SavedModel, writeExecutableOnly, writeSavedModel } from './saved.js';
import { exportExecutable, exportImage } from '../compiled/archive.js';
import { compileOptionsFrom } from '../compiled/backend.js';
import type { LatencyStats, PerfCounterLists } from '../profile/latency.js';

export interface ExecutorSettings {
  /** Weight name → replica grouping. */
  readonly replicaGrouping?: Readonly<Record<string, WeightGrouping>>;
  /**
   * Where the step runs. Default: the compiled executable — built with the Poplar SDK when popc
   * is on PATH, else against the poplar-host emulation. `referenceBackend` interprets the IR.
   */
  readonly backend?: BackendFactory;
  /** Where ipu_print_tensor writes. */
  readonly print?: (line: string) => void;
  /** IR dumps and verification of the compile pipeline (--print-ir-after and friends). */
  readonly passes?: PassManagerOptions;
}

export type { RandomState } from './saved.js';

/**
 * A model prepared for the device, like PopTorch's PoplarExecutor: compiled on first use,
 * run with host tensors whose first dimension holds all the micro-batches of one run, with a host
 * copy of the weights kept in step with the device.
 *
 * compile() and run() block until they are done, as in PopTorch; compileAsync() and runAsync() do
 * the same without blocking the event loop. One call at a time: a call made while compileAsync()
 * or runAsync() is under way throws instead of waiting for it (await it first). dispose() ends the
 * executable's process; a model not disposed does not keep Node running, and its process is
 * stopped when Node exits.
 */
export abstract class PoplarExecutor {
  abstract readonly kind: 'training' | 'inference';
  readonly model: Graph;
  readonly options: Options;
  protected readonly settings: ExecutorSettings;
  protected module: Module | undefined;
  protected backend: Backend | undefined;
  /** Host copy of the weights (as the user sees them: grouped weights have a leading group dim). */
  private host = new Map<string, Tensor>();
  /** A run changed the weights on the device since they were last copied to the host. */
  private deviceAhead = false;
  /** Files this model was loaded from (load()): a save never replaces them. */
  loadedFrom: readonly string[] = [];
  /** The host copy changed since the last copy to the device. */
  private hostDirty = false;
  /** Device state kept on the host while detached (detachFromDevice): restored when attached again. */
  private detachedState: { optimizer: Record<string, Tensor>; counter: number } | undefined;
  private anchors = new Map<string, Tensor>();
  /** Warnings from compiling (options that have no effect, ...); tools print them. */
  warnings: Diagnostic[] = [];
  /** Class-index inputs of losses, checked on the host before each run: name → (classes, ignore_index). */
  private labelChecks: LabelCheck[] | undefined;
  /** The options that shape the compiled step, as they were at compilation. */
  private compiledWith: Record<string, unknown> | undefined;
  /** compiledWith's values as JSON text, for the check before each run. */
  private compiledText: Record<string, string> = {};
  protected runs = 0;
  /** The asynchronous call under way ('runAsync()', ...), during which other calls are refused. */
  private inFlight: string | undefined;
  /** Abandons an asynchronous compile (and stops its build) when the model is disposed. */
  private abortStart: AbortController | undefined;
  private disposed = false;
  /** Profiling and cycle counting (Options.enableProfiling, logCycleCount, POPLAR_ENGINE_OPTIONS), made when compiling. */
  private profile: ModelProfile | undefined;
  /** Weights a training step updates without a gradient: batch-norm running statistics. */
  private bufferNames: string[] | undefined;
  /** The outfeed the next run feeds (outfeed()). */
  private nextOutfeed: Outfeed | undefined;
  /** Where the model's log lines go (Options.logDir), made when compiling. */
  private log: ModelLog | undefined;
  /** Time spent in each compile pass (after compile; the training pipeline's passes). */
  passTimings: readonly PassTiming[] = [];

  constructor(model: Graph, options: Options, settings: ExecutorSettings = {}) {
    this.model = model;
    this.options = options;
    this.settings = settings;
  }

  /**
   * A warning made after compiling (the compile's own are in `warnings`, which callers print):
   * kept in `warnings` and logged at WARN, to stderr and the model's log file.
   */
  protected warnLater(d: Diagnostic): void {
    this.warnings.push(d);
    (this.log ?? ModelLog.for(this.options, this.kind)).line('WARN', renderDiagnostic(d).replace(/^warning: /, ''));
  }

  /** Builds the step's Module, pausing between passes (see compiled/drive.ts). */
  protected abstract buildModule(step: StepSettings): Waiting<Module>;
  /** The graph whose outputs a run returns. */
  protected abstract get outputGraph(): string;

  /** The outputs a run returns: those of the output graph, or of its pipeline stages (`stage0`, ...). */
  protected modelOutputs(): { name: string }[] {
    const m = this.module!;
    const g = m.graphs.get(this.outputGraph);
    if (g) return g.outputs;
    return [...m.graphs].filter(([n]) => /^stage\d+$/.test(n)).flatMap(([, x]) => x.outputs);
  }

  get isCompiled(): boolean {
    return this.module !== undefined;
  }

  /**
   * After a compile on the compiled backend: whether the executable came from the executable cache,
   * and why not (undefined on backends that build nothing, such as the reference interpreter).
   */
  get executableCache(): BackendCacheStatus | undefined {
    return this.backend?.cache;
  }

  get isDisposed(): boolean {
    return this.disposed;
  }

  /** The compiled module (compiling first if needed): for dumps and tests. */
  compiledModule(): Module {
    this.usable('compiledModule');
    this.ensureCompiled();
    return this.module!;
  }

  protected stepSettings(): StepSettings {
    return stepSettingsFrom(this.options, this.settings.replicaGrouping);
  }

  /**
   * Refuses calls on a disposed model, and calls made while an asynchronous one is under way
   * (they would interleave with its requests to the executable).
   */
  protected usable(what: string): void {
    if (this.disposed) throw disposedError(what);
    if (this.inFlight) {
      throw new DiagnosticError(error(`${what}: ${this.inFlight} on this model has not finished`, undefined, [`await it before calling ${what} (one call at a time per model)`]));
    }
  }

  /** Builds the step and loads it on the backend. Later calls do nothing. */
  compile(): void {
    this.usable('compile');
    this.ensureCompiled();
  }

  /** compile() without blocking the event loop: the build and the executable's start are awaited, the passes and code generation pause between stages. */
  async compileAsync(): Promise<void> {
    this.usable('compileAsync');
    await this.oneAtATime('compileAsync()', () => this.ensureCompiledAsync());
  }

  private ensureCompiled(): void {
    if (this.module) {
      if (!this.backend) this.reattach();
      return;
    }
    const t0 = performance.now();
    const module = driveSync(this.prepareModule());
    const t1 = performance.now();
    this.attach(module, this.backendFactory()(module, this.backendOptions()), [t0, t1]);
  }

  private async ensureCompiledAsync(): Promise<void> {
    if (this.module) {
      // a detached model starts its executable again (from the cache: no build)
      if (!this.backend) this.reattach();
      return;
    }
    const abort = new AbortController();
    this.abortStart = abort;
    try {
      const t0 = performance.now();
      const module = await driveAsync(this.prepareModule(), abort.signal);
      const t1 = performance.now();
      const factory = this.backendFactory();
      const backend = factory.startAsync ? await factory.startAsync(module, this.backendOptions(), abort.signal) : factory(module, this.backendOptions());
      if (this.disposed) {
        // disposed just as the start finished: nothing may keep the new process
        backend.dispose?.();
        throw disposedError('compileAsync');
      }
      this.attach(module, backend, [t0, t1]);
    } finally {
      this.abortStart = undefined;
    }
  }

  /** What compile() does before the backend starts: the options' checks and the compile passes. */
  private *prepareModule(): Waiting<Module> {
    const problems = asDiagnostic(() => this.options.validateFor(this.kind));
    logLevel(); // a bad TILEGRAPH_LOG_LEVEL is an error before anything is built
    this.log = ModelLog.for(this.options, this.kind);
    this.warnings = [...problems.map((p) => warning(`${p.option}: ${p.message}`)), ...optionsWithoutEffect(this.options, this.kind, this.onIpuHardware())];
    this.profile ??= ModelProfile.start(this.options, this.kind);
    checkDistributedRun(this.options, this.settings.backend);
    const step = this.stepSettings();
    yield;
    return yield* this.buildModule(step);
  }

  /** Whether the step may run on IPU hardware: not the reference interpreter, not the emulation. */
  private onIpuHardware(): boolean {
    if (this.settings.backend === referenceBackend) return false;
    // another factory (an exported executable, a test's): its target is its own business
    if (this.settings.backend) return true;
    try {
      return findToolchain().kind === 'sdk';
    } catch {
      return false; // no compiler: the build says so
    }
  }

  private backendFactory(): BackendFactory {
    return this.settings.backend ?? compiledBackendFor(this.options);
  }

  private backendOptions(): BackendOptions {
    const seed = this.options.random_seed;
    const engineOptions = this.profile?.engineOptions;
    return { ...(seed !== undefined ? { seed } : {}), ...(this.settings.print ? { print: this.settings.print } : {}), ...(engineOptions ? { engineOptions } : {}) };
  }

  /**
   * Takes a started backend into use. Only here is the model compiled, so a failed start is
   * retried rather than half-compiled. `times`: when the passes started and ended (performance.now).
   */
  private attach(module: Module, backend: Backend, times: readonly [number, number]): void {
    this.backend = backend;
    this.module = module;
    for (const [name, t] of this.host) this.writeToDevice(name, t);
    this.hostDirty = false;
    this.compiledWith = compiledOptions(this.options);
    this.compiledText = Object.fromEntries(Object.entries(this.compiledWith).map(([k, v]) => [k, JSON.stringify(v)]));
    const seconds = { passes: (times[1] - times[0]) / 1000, start: (performance.now() - times[1]) / 1000 };
    const compiled = compiledOf(backend);
    const plan = compiled ? { plan: compiled.plan } : {};
    this.warnings.push(...this.profile!.compiled({ module, kind: this.kind, options: this.options, backend: backend.kind, passes: this.passTimings, seconds, ...plan }));
    this.warnings = limitRepeats(this.warnings, this.options.max_repeat_logs);
    const cache = backend.cache ? (backend.cache.hit ? ', executable from the cache' : `, executable built (${backend.cache.reason ?? 'not in the cache'})`) : '';
    this.log!.line('INFO', `compiled ${this.kind} model '${this.options.modelNameFor(this.kind)}' for the ${backend.kind} backend: passes ${seconds.passes.toFixed(2)} s, start ${seconds.start.toFixed(2)} s${cache}`);
    this.log!.diagnostics(this.warnings);
  }

  /** Runs `f` as the one call under way; if the model is disposed meanwhile, it fails with that. */
  private async oneAtATime<T>(what: string, f: () => Promise<T>): Promise<T> {
    this.inFlight = what;
    try {
      const r = await f();
      if (this.disposed) throw disposedError(what);
      return r;
    } catch (e) {
      // what failed (a killed process, an abandoned build) follows from the dispose
      if (this.disposed) throw disposedError(what);
      throw e;
    } finally {
      this.inFlight = undefined;
    }
  }

  // --- attaching and detaching (PopTorch's attachToDevice, detachFromDevice) --------------------

  /** Whether the compiled model holds its device (the executable's process on the emulation). */
  isAttachedToDevice(): boolean {
    this.usable('isAttachedToDevice');
    return this.backend !== undefined;
  }

  /**
   * Gives the device up, as PopTorch's detachFromDevice: the weights, the optimizer state and the
   * random-number state are copied to the host and the executable stops. The next run (or
   * attachToDevice) starts it again and restores them, so training goes on exactly.
   */
  detachFromDevice(): void {
    this.usable('detachFromDevice');
    if (!this.module) throw new DiagnosticError(error('detachFromDevice: the model is not compiled yet, so it holds no device', undefined, ['compile() or run it first']));
    if (!this.backend) throw new DiagnosticError(error('detachFromDevice: the model is already detached', undefined, ['attachToDevice() attaches it again (a run does too)']));
    this.copyToHost();
    const optimizer = this.optimizerStateDict();
    const counter = this.backend.randomCounter();
    const backend = this.backend;
    this.backend = undefined;
    this.detachedState = { optimizer, counter };
    backend.dispose?.();
  }

  /** Attaches a detached model again (PopTorch's attachToDevice); a run attaches it too. */
  attachToDevice(): void {
    this.usable('attachToDevice');
    if (!this.module) throw new DiagnosticError(error('attachToDevice: the model is not compiled yet', undefined, ['compile() attaches it']));
    if (this.backend) throw new DiagnosticError(error('attachToDevice: the model is already attached'));
    this.reattach();
  }

  private reattach(): void {
    const module = this.module!;
    const saved = this.detachedState;
    this.backend = this.backendFactory()(module, this.backendOptions());
    for (const [name, t] of this.host) this.writeToDevice(name, t);
    this.hostDirty = false;
    if (saved) {
      for (const [k, t] of Object.entries(saved.optimizer)) this.writeToDevice(k, t);
      this.backend.setRandomCounter(saved.counter);
    }
    this.detachedState = undefined;
  }

  /** PopTorch's destroy(): the same as dispose(). */
  destroy(): void {
    this.dispose();
  }

  /**
   * Ends the executable's process and its worker and drops the compiled step, the host copy of
   * the weights and the anchors. A compileAsync() or runAsync() under way is abandoned (a build in
   * progress is stopped) and rejects with an error saying the model was disposed, as every later
   * call does. Calling dispose() again does nothing.
   */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.abortStart?.abort(disposedError('compileAsync'));
    const backend = this.backend;
    this.backend = undefined;
    this.module = undefined;
    this.host.clear();
    this.anchors.clear();
    this.takeOutfeed()?.fail(disposedError('run'));
    backend?.dispose?.();
    this.profile?.dispose();
  }

  // --- measurements (the emulated engine's; see session/profiling.ts) --------------------------

  /** This model's profile folder (`<dir>/<modelName>`), when one is asked for; known once compiled. */
  get profileDir(): string | undefined {
    return this.profile?.dir;
  }

  /**
   * PopTorch's cycleCount(): the estimated cycles of the last run on replica 0 — the emulated
   * engine's sum of the compute sets' and PopLibs steps' estimates at the GC200 clock, not a
   * hardware counter. Needs Options.logCycleCount(true), as in PopTorch, and the compiled backend.
   */
  cycleCount(): number {
    this.usable('cycleCount');
    return this.measured().cycleCount(this.backend?.kind, this.runs);
  }

  /**
   * PopTorch's getPerfCounters(): per input (output) stream, the timestamps in seconds of each of
   * its copies in the last run ('input', 'input_complete', 'output', 'output_complete'), on
   * replica 0. Needs a measured model (logCycleCount(true) or a profile) on the compiled backend.
   */
  getPerfCounters(): PerfCounterLists {
    this.usable('getPerfCounters');
    return this.measured().perfCounters(this.backend?.kind, this.runs);
  }

  /** Round trip of the last run's iterations, first input requested to last output back: [min, max, mean] seconds. */
  getLatency(): LatencyStats {
    return this.latency('getLatency');
  }
  /** From the last input transferred to the last output available: [min, max, mean] seconds. */
  getComputeLatency(): LatencyStats {
    return this.latency('getComputeLatency');
  }
  /** From the first input requested to the last input transferred: [min, max, mean] seconds. */
  getHostIpuLatency(): LatencyStats {
    return this.latency('getHostIpuLatency');
  }
  /** From the first output available to the last output written back: [min, max, mean] seconds. */
  getIpuHostLatency(): LatencyStats {
    return this.latency('getIpuHostLatency');
  }

  private latency(which: 'getLatency' | 'getComputeLatency' | 'getHostIpuLatency' | 'getIpuHostLatency'): LatencyStats {
    this.usable(which);
    return this.measured().latency(which, this.backend?.kind, this.runs);
  }

  private measured(): ModelProfile {
    return this.profile ?? ModelProfile.unprofiled(this.options);
  }

  /** The options the step was compiled with must still hold: the program's loops and the host layout follow them. */
  private checkOptionsUnchanged(): void {
    const now = compiledOptions(this.options);
    const changed = Object.keys(now).filter((k) => JSON.stringify(now[k]) !== this.compiledText[k]);
    if (changed.length) {
      throw new DiagnosticError(
        error('the options changed after the model was compiled', undefined, [
          ...changed.map((k) => `${k}: ${JSON.stringify(this.compiledWith![k])} → ${JSON.stringify(now[k])}`),
          'create a new model to use the new options',
        ]),
      );
    }
  }

  private layout(): RunLayout {
    const R = this.options.replication_factor;
    const k = this.options.input_group_size;
    const group: CommGroup = k > 1 ? commGroup(this.options.input_group_type, k) : { type: 'none', size: 1 };
    const inputGroupOf = Array.from({ length: R }, (_, r) => groupOfReplica(group, R, r));
    return {
      deviceIterations: this.options.device_iterations,
      accumulation: this.kind === 'training' ? this.options.Training.gradient_accumulation : 1,
      replicas: R,
      inputGroupOf,
      inputGroups: Math.max(...inputGroupOf) + 1,
    };
  }

  /** Names of the model's inputs with their per-micro-batch types. */
  inputTypes(): { name: string; type: TensorType }[] {
    return this.model.inputs().map((o) => ({ name: o.attrs['name'] as string, type: o.result.type }));
  }

  /**
   * Runs one step: `inputs[name]` holds micro-batch × deviceIterations × gradientAccumulation ×
   * replicas samples along its first dimension, as a Tensor, a typed array or an array of numbers
   * (see RunInput). Returns the outputs selected by outputMode. The inputs are checked before the
   * model is compiled. With Options.enableSyntheticData(true) they may be left out: the device
   * makes zeros in their place and no input data leaves the host.
   */
  run(inputs?: RunInputs): Record<string, Tensor> {
    this.usable('run');
    const feed = this.takeOutfeed();
    return feedRun(feed, () => {
      const tensors = this.checkInputs(inputs);
      this.ensureCompiled();
      const produced = this.backend!.run(this.streams(tensors));
      // a print callback may have disposed the model
      if (this.disposed) throw disposedError('run');
      if (feed) feedFinished(feed, produced, this.layout().replicas, this.outputNames());
      this.afterRun();
      return this.outputs(produced);
    });
  }

  /** run() without blocking the event loop (compiling first with compileAsync() if needed). */
  async runAsync(inputs?: RunInputs): Promise<Record<string, Tensor>> {
    this.usable('runAsync');
    const feed = this.takeOutfeed();
    return this.oneAtATime('runAsync()', () =>
      feedRun(feed, async () => {
        const tensors = this.checkInputs(inputs);
        await this.ensureCompiledAsync();
        if (this.disposed) throw disposedError('runAsync');
        const backend = this.backend!;
        const streams = this.streams(tensors);
        let produced: Record<string, Tensor[]>;
        if (feed && backend.runFed) produced = await backend.runFed(streams, outfeedListener(feed, this.outputNames()));
        else {
          produced = backend.runAsync ? await backend.runAsync(streams) : backend.run(streams);
          if (feed) feedFinished(feed, produced, this.layout().replicas, this.outputNames());
        }
        if (this.disposed) throw disposedError('runAsync');
        this.afterRun();
        return this.outputs(produced);
      }),
    );
  }

  // --- outfeeds (TF-IPU's outfeed queue) ------------------------------------------------------

  /**
   * An outfeed of the next run: its outputs' values (and anchored tensors') in the order the
   * device produces them — one per output, replica and micro-batch — readable with `for await`
   * while `runAsync` goes on, on the compiled backend (the executable sends each as the device
   * copies it to the host) and on the reference interpreter (which pauses after each execution).
   * It ends when the run ends and throws the run's error. With run(), which blocks, the values
   * are all there when it returns. One outfeed per run.
   */
  outfeed(): Outfeed {
    this.usable('outfeed');
    if (this.nextOutfeed) throw new DiagnosticError(error('outfeed: the next run already has an outfeed', undefined, ['read that one: a run feeds one outfeed']));
    this.nextOutfeed = new Outfeed();
    return this.nextOutfeed;
  }

  private takeOutfeed(): Outfeed | undefined {
    const feed = this.nextOutfeed;
    this.nextOutfeed = undefined;
    return feed;
  }

  private outputNames(): Set<string> {
    return new Set(this.modelOutputs().map((o) => o.name));
  }


  /**
   * One run's inputs as tensors of their run shapes, checked against the model before anything is
   * compiled: the options' consistency first (the layout follows them), then names, types, shapes
   * and class labels.
   */
  private checkInputs(inputs: unknown): Record<string, Tensor> {
    if (this.module) this.checkOptionsUnchanged();
    else asDiagnostic(() => this.options.validateFor(this.kind));
    // synthetic data: the device makes the inputs; ones given are still checked, never sent
    if (noInputs(inputs, this.options.synthetic_data, this.inputTypes())) return {};
    const tensors = runInputTensors(inputs, this.inputTypes(), microBatchesPerRun(this.layout()));
    this.labelChecks ??= labelChecksOf(this.model);
    checkLabels(this.labelChecks, tensors);
    return tensors;
  }

  /** The backend's input streams: each input's micro-batches in the order the replicas read them. */
  private streams(tensors: Readonly<Record<string, Tensor>>): Record<string, Tensor[]> {
    if (this.hostDirty) this.copyToDevice();
    const l = this.layout();
    const n = microBatchesPerRun(l);
    const streams: Record<string, Tensor[]> = {};
    if (this.options.synthetic_data) return streams; // the program has no input streams
    const views = this.backend?.copiesInputsAtOnce === true;
    for (const { name, type } of this.inputTypes()) streams[name] = streamForReplicas(splitBatch(name, tensors[name]!, type, n, views), l);
    return streams;
  }

  /** What every run does once the device is done: a training run leaves the host copy behind. */
  private afterRun(): void {
    if (this.kind === 'training') this.deviceAhead = true;
    this.broadcastBuffers();
  }

  /**
   * Options.broadcastBuffers (the default), as torch's DistributedDataParallel: after each run of
   * a replicated training model, its buffers (batch-norm running statistics kept as weights)
   * take replica 0's values on every replica. Within a run each replica updates its own from its
   * own micro-batches. broadcastBuffers(false) leaves each replica its own buffers.
   */
  private broadcastBuffers(): void {
    const m = this.module!;
    if (this.kind !== 'training' || !this.options.broadcast_buffers || m.replicationFactor < 2) return;
    this.bufferNames ??= bufferNames(this.model);
    for (const name of this.bufferNames) {
      const v = variableInfo(m, name);
      writeReplicas(m, this.backend!, v, readReplicas(m, this.backend!, v)[0]!);
    }
  }

  /** The outputs a run returns (per outputMode), keeping the anchored tensors' values. */
  private outputs(produced: Record<string, Tensor[]>): Record<string, Tensor> {
    this.runs++;
    this.log?.line('DEBUG', `run ${this.runs} of '${this.options.modelNameFor(this.kind)}' done`);
    const l = this.layout();
    const mode = this.options.output_mode === OutputMode.Default ? (this.kind === 'training' ? OutputMode.Final : OutputMode.All) : this.options.output_mode;
    const sel = (m: OutputMode, period: number): OutputSelection =>
      m === OutputMode.EveryN ? { mode: 'EveryN', period } : m === OutputMode.Sum ? { mode: 'Sum' } : m === OutputMode.Final ? { mode: 'Final' } : { mode: 'All' };
    const out: Record<string, Tensor> = {};
    for (const o of this.modelOutputs()) {
      const values = produced[o.name] ?? [];
      if (o.name.startsWith('anchor:')) continue;
      out[o.name] = selectOutputs(values, sel(mode, this.options.output_return_period), l);
    }
    for (const [name, a] of Object.entries(this.options.anchored_tensors)) {
      const values = produced[`anchor:${name}`];
      if (values) this.anchors.set(name, selectOutputs(values, sel(a.output_mode ?? mode, a.output_return_period), l));
    }
    return out;
  }

  /** The value of a tensor anchored with Options.anchorTensor, from the last run. */
  getAnchoredTensor(name: string): Tensor {
    this.usable('getAnchoredTensor');
    const t = this.anchors.get(name);
    if (!t) throw new DiagnosticError(error(`no anchored tensor named '${name}' has been returned yet (anchor it with Options.anchorTensor and run the model)`));
    return t;
  }

  /** Names of the weights and of the other state (optimizer state, accumulators) on the device. */
  getTensorNames(): string[] {
    this.usable('getTensorNames');
    this.ensureCompiled();
    return hostVariables(this.module!).map((v) => v.name);
  }

  private weightInfo(name: string): VariableInfo {
    this.ensureCompiled();
    return variableInfo(this.module!, name);
  }

  /** Reads a tensor from the device as the host sees it: one value, or one per group / replica. */
  private readFromDevice(name: string): Tensor {
    return readVariable(this.module!, this.backend!, this.weightInfo(name));
  }

  private writeToDevice(name: string, t: Tensor): void {
    writeVariable(this.module!, this.backend!, this.weightInfo(name), t);
  }

  /** Copies the weights from the device to the host copy. */
  copyWeightsToHost(): void {
    this.usable('copyWeightsToHost');
    this.copyToHost();
  }

  private copyToHost(): void {
    this.ensureCompiled();
    for (const v of hostVariables(this.module!)) if (v.role === 'weight') this.host.set(v.name, this.readFromDevice(v.name));
    this.hostDirty = false;
    this.deviceAhead = false;
  }

  /**
   * PopTorch's copyWeightsToHostIfNeeded: copies the weights to the host copy when a run changed
   * them on the device since the last copy (a training run). Returns whether it copied.
   */
  copyWeightsToHostIfNeeded(): boolean {
    this.usable('copyWeightsToHostIfNeeded');
    if (!this.module || !this.deviceAhead) return false;
    this.copyToHost();
    return true;
  }

  // --- saving and loading (PopTorch's save, compileAndExport and poptorch.load) ----------------

  /**
   * PopTorch's save(filename, export_model, save_rng_state), written atomically: with
   * `exportModel` (the default) the file holds the model graph, the options, the optimizer and
   * its state, the weights, the random-number state (with `saveRngState`) and the executable,
   * and load(file) gives a model that goes on exactly from here. Without it the file is the
   * exported executable alone, starting from the current weights (replica 0's), for
   * loadExecutable or `tilegraph run`. Compiles first when needed.
   */
  save(file: string, exportModel = true, saveRngState = true): void {
    this.usable('save');
    this.ensureCompiled();
    const compiled = !(this.backend instanceof ReferenceBackend);
    if (!exportModel) {
      if (!compiled) throw new DiagnosticError(error('save: with exportModel false the file holds only the executable, and the reference interpreter builds none', undefined, ['save with exportModel true, or use the compiled backend']));
      const state = new Map(hostVariables(this.module!).map((v) => [v.name, this.readFromDevice(v.name)] as const));
      writeExecutableOnly(file, this.executableBytes(wholeValues(this.module!, state)), this.loadedFrom);
      return;
    }
    this.copyToHost();
    const saved: SavedModel = {
      kind: this.kind,
      options: this.options.toJSON(),
      ...this.savedOptimizer(),
      ...(this.settings.replicaGrouping ? { replicaGrouping: this.settings.replicaGrouping } : {}),
      graph: printGraph(this.model),
      weights: Object.fromEntries(this.host),
      optimizerState: this.optimizerStateDict(),
      ...(saveRngState ? { rng: this.rngState } : {}),
      ...(compiled ? { executable: this.executableBytes() } : {}),
    };
    writeSavedModel(file, saved, this.loadedFrom);
  }

  /**
   * The running executable as an exported one, starting from `startFrom` (by state name) where
   * given: taken from the executable's folder, so nothing is built (a loaded model needs no
   * compiler to be saved again).
   */
  private executableBytes(startFrom?: ReadonlyMap<string, Tensor>): Buffer {
    const b = this.backend && compiledOf(this.backend);
    if (!b) return exportExecutable(this.module!, compileOptionsFrom(this.options), startFrom).bytes;
    const initial = new Map(b.image.initial);
    for (const [name, t] of startFrom ?? []) if (initial.has(name)) initial.set(name, t);
    return exportImage(b.image, initial);
  }

  /** The optimizer a saved training model keeps (none for inference). */
  protected savedOptimizer(): { optimizer?: SavedModel['optimizer'] } {
    return {};
  }

  /**
   * PopTorch's compileAndExport as a method: compiles the model and saves it (see save), so that
   * load(file) — or, without `exportModel`, loadExecutable(file) — runs it later.
   */
  compileAndExport(file: string, exportModel = true): void {
    this.usable('compileAndExport');
    this.save(file, exportModel, true);
  }

  /** Copies the host copy of the weights to the device. */
  copyWeightsToDevice(): void {
    this.usable('copyWeightsToDevice');
    this.copyToDevice();
  }

  private copyToDevice(): void {
    this.ensureCompiled();
    for (const [name, t] of this.host) this.writeToDevice(name, t);
    this.hostDirty = false;
  }

  /** The weights by name, read from the device (like model.state_dict() after a PopTorch run). */
  stateDict(): Record<string, Tensor> {
    this.usable('stateDict');
    this.copyToHost();
    return Object.fromEntries(this.host);
  }

  /** Any device tensor by name (weights, optimizer state, accumulators), as the host sees it. */
  readTensor(name: string): Tensor {
    this.usable('readTensor');
    return this.readFromDevice(name);
  }

  /** Host variables besides the weights that carry over between runs; hyperparameters come from the optimizer instead. */
  private optimizerStateNames(): string[] {
    this.ensureCompiled();
    return hostVariables(this.module!)
      .filter((v) => v.role !== 'weight' && v.role !== 'hyperparameter')
      .map((v) => v.name);
  }

  /**
   * The device state a checkpoint keeps besides the weights, by name: optimizer slots (momenta),
   * step counters and gradient accumulators. With stateDict, enough to resume training exactly.
   */
  optimizerStateDict(): Record<string, Tensor> {
    this.usable('optimizerStateDict');
    return Object.fromEntries(this.optimizerStateNames().map((n) => [n, this.readFromDevice(n)]));
  }

  /**
   * PopTorch's rng_state: the seed (Options.randomSeed, 0 when unset) and the counter of the random
   * streams, which advances with every run of a program that draws random numbers (dropout, ...).
   * A checkpoint keeps it, so a resumed training draws the numbers an uninterrupted one would.
   */
  get rngState(): RandomState {
    this.usable('rngState');
    this.ensureCompiled();
    return { seed: this.options.random_seed ?? 0, counter: this.backend!.randomCounter() };
  }

  set rngState(s: RandomState) {
    this.usable('rngState');
    this.ensureCompiled();
    const seed = this.options.random_seed ?? 0;
    if (s.seed !== seed) {
      throw new DiagnosticError(error(`rngState: the state is of seed ${s.seed} but this model's seed is ${seed}`, undefined, ['the seed is an option: build the model with Options().randomSeed(' + String(s.seed) + ')']));
    }
    this.backend!.setRandomCounter(s.counter);
  }

  /** Restores what optimizerStateDict returned: the same names, each of its type. */
  loadOptimizerStateDict(dict: Readonly<Record<string, Tensor>>): void {
    this.usable('loadOptimizerStateDict');
    const names = this.optimizerStateNames();
    const unknown = Object.keys(dict).filter((k) => !names.includes(k));
    const missing = names.filter((n) => !Object.hasOwn(dict, n));
    if (unknown.length || missing.length) {
      const notes = [...(unknown.length ? [`unexpected: ${unknown.join(', ')}`] : []), ...(missing.length ? [`missing: ${missing.join(', ')}`] : [])];
      throw new DiagnosticError(error('loadOptimizerStateDict: the names do not match the optimizer state of this model (another optimizer or options?)', undefined, notes));
    }
    for (const [k, t] of Object.entries(dict)) this.writeToDevice(k, t);
  }

  /**
   * Loads weights by name (load_state_dict). With `strict`, every weight must be given and no
   * unknown name is accepted. Takes effect on the device before the next run.
   */
  loadStateDict(dict: Readonly<Record<string, Tensor>>, strict = true): void {
    this.usable('loadStateDict');
    this.ensureCompiled();
    const weights = hostVariables(this.module!).filter((v) => v.role === 'weight').map((v) => v.name);
    const known = new Set(weights);
    const unknown = Object.keys(dict).filter((k) => !known.has(k));
    const missing = weights.filter((w) => !(w in dict));
    if (unknown.length || (strict && missing.length)) {
      const notes = [...(unknown.length ? [`unexpected: ${unknown.join(', ')}`] : []), ...(strict && missing.length ? [`missing: ${missing.join(', ')}`] : [])];
      throw new DiagnosticError(error('loadStateDict: the names do not match the model’s weights', undefined, notes));
    }
    for (const [k, given] of Object.entries(dict)) {
      // a copy, as torch's load_state_dict copies: later changes to the caller's tensor stay out
      if (!(given instanceof Tensor)) throw new DiagnosticError(error(`loadStateDict: '${k}' is not a Tensor`));
      const t = given.clone();
      this.writeToDevice(k, t); // validates shapes now rather than at the next run
      this.host.set(k, t);
    }
  }
}

function disposedError(what: string): DiagnosticError {
  return new DiagnosticError(error(`${what}: the model was disposed`, undefined, ['dispose() ended its executable; create a new model to use it again']));
}

/** The compiled backend under a backend, if any (one process's view of a distributed run wraps it). */
function compiledOf(b: Backend): CompiledBackend | undefined {
  const inner = b instanceof ProcessReplicasBackend ? b.inner : b;
  return inner instanceof CompiledBackend ? inner : undefined;
}
