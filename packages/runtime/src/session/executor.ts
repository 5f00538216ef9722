import {
  CommGroup,
  DiagnosticError,
  Graph,
  Module,
  Tensor,
  VariableInfo,
  VariableRetrievalMode as IrRetrieval,
  Diagnostic,
  allocData,
  cloneGraph,
  error,
  warning,
  formatShape,
  groupOfReplica,
  hostStorage,
  hostVariables,
  joinShards,
  rankInGroup,
  replicaGroups,
  shapesEqual,
  shardOfTensor,
} from '@tilegraph/ir';
import { AutoStage, CommGroupType, ExecutionStrategy, Options, OptionsError, OutputMode, PhasedExecution, PipelinedExecution, ReductionType, MeanReductionStrategy, ShardedExecution, Stage, VariableRetrievalMode } from '@tilegraph/frontend';
import {
  MeanReductionStrategy as StepStrategy,
  OptimizerSpec,
  PassManagerOptions,
  PassTiming,
  RecomputationMode,
  ReplicaGroupingSetting,
  StepSettings,
  TensorLocations,
  buildInferenceModule,
  buildTrainingModule,
  updateHyper,
  ExecutionSpec,
  StageSpec,
} from '@tilegraph/passes';
import { Backend, BackendFactory } from './backend.js';
import { compiledBackendFor } from '../compiled/backend.js';
import { OutputSelection, RunLayout, microBatchesPerRun, selectOutputs, splitBatch, streamForReplicas } from './io.js';

/** Per-weight replica grouping, as PopTorch's `per_replica_params`: (CommGroupType, shards, VariableRetrievalMode). */
export interface WeightGrouping {
  readonly type: CommGroupType;
  readonly shards: number;
  readonly retrieval?: VariableRetrievalMode;
}

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

function commGroup(type: CommGroupType, size: number): CommGroup {
  switch (type) {
    case CommGroupType.All:
      return { type: 'all', size: 0 };
    case CommGroupType.Consecutive:
      return { type: 'consecutive', size };
    case CommGroupType.Orthogonal:
      return { type: 'orthogonal', size };
    case CommGroupType.NoGrouping:
      return { type: 'none', size: 1 };
  }
}

function retrievalMode(m: VariableRetrievalMode | undefined): IrRetrieval {
  return m === VariableRetrievalMode.AllReplicas ? 'all_replicas' : 'one_per_group';
}

/**
 * What the step is built for, from PopTorch-style Options (and per-weight replica grouping): the
 * one translation sessions and the command line share.
 */
export function stepSettingsFrom(o: Options, replicaGrouping: Readonly<Record<string, WeightGrouping>> = {}): StepSettings {
  const grouping = new Map<string, ReplicaGroupingSetting>();
  for (const [name, g] of Object.entries(replicaGrouping)) {
    grouping.set(name, { group: commGroup(g.type, g.shards), retrieval: retrievalMode(g.retrieval) });
  }
  const strategy = o.Training.mean_strategy_explicit
    ? ({ [MeanReductionStrategy.Running]: 'running', [MeanReductionStrategy.Post]: 'post', [MeanReductionStrategy.PostAndLoss]: 'postandloss' } as const)[
        o.Training.mean_accumulation_and_replication_reduction_strategy
      ]
    : undefined;
  return {
    deviceIterations: o.device_iterations,
    replicationFactor: o.replication_factor,
    gradientAccumulation: o.Training.gradient_accumulation,
    reduction: o.Training.accumulation_and_replication_reduction_type === ReductionType.Sum ? 'sum' : 'mean',
    ...(strategy ? { meanStrategy: strategy as StepStrategy } : {}),
    replicaGrouping: grouping,
    // RecomputationType members are PopART's names; the step settings use them lower-cased
    recomputation: o.auto_recomputation.toLowerCase() as RecomputationMode,
    ...tensorLocationsFrom(o),
    execution: executionSpecFrom(o.execution_strategy),
  };
}

/** setExecutionStrategy(...) as the placement pass reads it. */
export function executionSpecFrom(st: ExecutionStrategy): ExecutionSpec {
  const stageSpec = (s: Stage): StageSpec => (s.ipu_id === undefined ? { blocks: [...s.blocks] } : { blocks: [...s.blocks], ipu: s.ipu_id });
  if (st instanceof PipelinedExecution) {
    return {
      kind: st instanceof ShardedExecution ? 'sharded' : 'pipelined',
      autoStage: st.auto_stage === AutoStage.AutoIncrement ? 'auto_increment' : 'same_as_ipu',
      stages: st.stages.map(stageSpec),
      blockIpus: Object.fromEntries(st.auto_stage_ipus),
      describe: st.describe(),
    };
  }
  const phased = st as PhasedExecution;
  const liveness = ({ AlwaysLive: 'always_live', OffChipAfterFwd: 'off_chip_after_fwd', OffChipAfterFwdNoOverlap: 'off_chip_after_fwd_no_overlap', OffChipAfterEachPhase: 'off_chip_after_each_phase' } as const)[phased.tensors_liveness];
  return {
    kind: phased.type === 'SerialPhasedExecution' ? 'serial_phased' : 'parallel_phased',
    autoStage: 'same_as_ipu',
    stages: [],
    phases: phased.phases.map((p) => ({ stages: p.stages.map(stageSpec) })),
    separateBackwardPhase: phased.separate_backward_phase,
    liveness,
    describe: phased.describe(),
  };
}

/** opts.TensorLocations as the step settings take it (only the classes that were set). */
function tensorLocationsFrom(o: Options): { tensorLocations?: TensorLocations } {
  const l = o.TensorLocations;
  const out: { -readonly [K in keyof TensorLocations]: TensorLocations[K] } = {};
  if (l.location_activation) out.activation = l.location_activation;
  if (l.location_weight) out.weight = l.location_weight;
  if (l.location_optimizer) out.optimizer = l.location_optimizer;
  if (l.location_accumulator) out.accumulator = l.location_accumulator;
  return Object.keys(out).length ? { tensorLocations: out } : {};
}

/** Rethrows an option problem as a diagnostic, so tools print it like every other error. */
function asDiagnostic<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof OptionsError) throw new DiagnosticError(error(e.message));
    throw e;
  }
}

/**
 * A model prepared for the device, like PopTorch's PoplarExecutor: compiled on first use,
 * run with host tensors whose first dimension holds all the micro-batches of one run, with a host
 * copy of the weights kept in step with the device.
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
  /** The host copy changed since the last copy to the device. */
  private hostDirty = false;
  private anchors = new Map<string, Tensor>();
  /** Warnings from compiling (options that have no effect, ...); tools print them. */
  warnings: Diagnostic[] = [];
  /** Class-index inputs of losses, checked on the host before each run: name → (classes, ignore_index). */
  private labelChecks: { input: string; classes: number; ignore?: number }[] | undefined;
  /** The options that shape the compiled step, as they were at compilation. */
  private compiledWith: Record<string, unknown> | undefined;
  protected runs = 0;

  constructor(model: Graph, options: Options, settings: ExecutorSettings = {}) {
    this.model = model;
    this.options = options;
    this.settings = settings;
  }

  protected abstract buildModule(step: StepSettings): Module;
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

  /** The compiled module (compiling first if needed): for dumps and tests. */
  compiledModule(): Module {
    this.compile();
    return this.module!;
  }

  protected stepSettings(): StepSettings {
    return stepSettingsFrom(this.options, this.settings.replicaGrouping);
  }

  /** Builds the step and loads it on the backend. Later calls do nothing. */
  compile(): void {
    if (this.module) return;
    const problems = asDiagnostic(() => this.options.validateFor(this.kind));
    this.warnings = problems.map((p) => warning(`${p.option}: ${p.message}`));
    if (this.kind === 'training' && this.options.Training.automatic_loss_scaling) {
      this.warnings.push(
        warning('Training.setAutomaticLossScaling: automatic loss scaling is not implemented; the loss scale stays at the optimizer\'s loss_scaling', undefined, [
          'set loss_scaling on the optimizer instead',
        ]),
      );
    }
    const step = this.stepSettings();
    const module = this.buildModule(step);
    const seed = this.options.random_seed;
    // set only once the backend exists, so a failed start is retried rather than half-compiled
    this.backend = (this.settings.backend ?? compiledBackendFor(this.options))(module, {
      ...(seed !== undefined ? { seed } : {}),
      ...(this.settings.print ? { print: this.settings.print } : {}),
    });
    this.module = module;
    for (const [name, t] of this.host) this.writeToDevice(name, t);
    this.hostDirty = false;
    this.compiledWith = compiledOptions(this.options);
  }

  /** The options the step was compiled with must still hold: the program's loops and the host layout follow them. */
  private checkOptionsUnchanged(): void {
    const now = compiledOptions(this.options);
    const changed = Object.keys(now).filter((k) => JSON.stringify(now[k]) !== JSON.stringify(this.compiledWith![k]));
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
  inputTypes(): { name: string; type: import('@tilegraph/ir').TensorType }[] {
    return this.model.inputs().map((o) => ({ name: o.attrs['name'] as string, type: o.result.type }));
  }

  /**
   * Runs one step: `inputs[name]` holds micro-batch × deviceIterations × gradientAccumulation ×
   * replicas samples along its first dimension. Returns the outputs selected by outputMode.
   */
  run(inputs: Readonly<Record<string, Tensor>>): Record<string, Tensor> {
    this.compile();
    this.checkOptionsUnchanged();
    if (this.hostDirty) this.copyWeightsToDevice();
    const l = this.layout();
    const n = microBatchesPerRun(l);
    const streams: Record<string, Tensor[]> = {};
    const given = new Set(Object.keys(inputs));
    for (const { name, type } of this.inputTypes()) {
      const t = inputs[name];
      if (!t) throw new DiagnosticError(error(`input '${name}' (${n} micro-batches of ${type.dtype}${formatShape(type.shape)}) was not given`));
      streams[name] = streamForReplicas(splitBatch(name, t, type, n), l);
      given.delete(name);
    }
    if (given.size) {
      throw new DiagnosticError(error(`the model has no input named ${[...given].map((x) => `'${x}'`).join(', ')} (inputs: ${this.inputTypes().map((i) => i.name).join(', ')})`));
    }
    this.checkLabels(inputs);
    const produced = this.backend!.run(streams);
    this.runs++;
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

  /**
   * Class indices fed to nll_loss / cross_entropy must name a class (or be the ignore_index): the
   * compiled loss selects by equality and would silently skip a bad label, so labels that come
   * straight from an input are checked here, on the host, with the position of the first bad one.
   */
  private checkLabels(inputs: Readonly<Record<string, Tensor>>): void {
    if (!this.labelChecks) {
      this.labelChecks = [];
      for (const op of this.model.ops) {
        if (op.kind !== 'nll_loss' && op.kind !== 'cross_entropy') continue;
        const target = op.operands[1]!.producer;
        if (target.kind !== 'input') continue;
        const shape = op.operands[0]!.type.shape;
        const ignore = op.attrs['ignore_index'] as number | undefined;
        this.labelChecks.push({ input: target.attrs['name'] as string, classes: shape.length === 1 ? shape[0]! : shape[1]!, ...(ignore !== undefined ? { ignore } : {}) });
      }
    }
    for (const c of this.labelChecks) {
      const t = inputs[c.input];
      if (!t) continue;
      for (let i = 0; i < t.size; i++) {
        const v = t.data[i]!;
        if ((v < 0 || v >= c.classes) && v !== c.ignore) {
          throw new DiagnosticError(
            error(`input '${c.input}': label ${v} at position ${i} is not a class index in [0, ${c.classes})${c.ignore !== undefined ? ` nor the ignore_index ${c.ignore}` : ''}`),
          );
        }
      }
    }
  }

  /** The value of a tensor anchored with Options.anchorTensor, from the last run. */
  getAnchoredTensor(name: string): Tensor {
    const t = this.anchors.get(name);
    if (!t) throw new DiagnosticError(error(`no anchored tensor named '${name}' has been returned yet (anchor it with Options.anchorTensor and run the model)`));
    return t;
  }

  /** Names of the weights and of the other state (optimizer state, accumulators) on the device. */
  getTensorNames(): string[] {
    this.compile();
    return hostVariables(this.module!).map((v) => v.name);
  }

  private weightInfo(name: string): VariableInfo {
    this.compile();
    const v = hostVariables(this.module!).find((x) => x.name === name);
    if (!v) throw new DiagnosticError(error(`the model has no tensor named '${name}'`, undefined, [`names: ${this.getTensorNames().slice(0, 20).join(', ')}`]));
    return v;
  }

  /**
   * Each replica's value of a host variable as the device holds it: whole tensors, with the
   * replicas' shards of a sharded variable joined within each replica group.
   */
  private readReplicas(v: VariableInfo): Tensor[] {
    const R = this.module!.replicationFactor;
    const { device, type } = hostStorage(this.module!, v);
    const perReplica = this.backend!.read(device.name);
    if (!device.location?.sharded) return perReplica;
    const whole = new Array<Tensor>(R);
    for (const members of replicaGroups(device.group, R)) {
      const t = joinShards(members.map((r) => perReplica[r]!), type);
      for (const r of members) whole[r] = t;
    }
    return whole;
  }

  /** Writes a whole value of a host variable on the given replicas (each takes its shard of a sharded one). */
  private writeReplicas(v: VariableInfo, value: Tensor, replicas?: readonly number[]): void {
    const R = this.module!.replicationFactor;
    const { device } = hostStorage(this.module!, v);
    const sharded = device.location?.sharded;
    if (!sharded) {
      this.backend!.write(device.name, value, replicas);
      return;
    }
    // replicas of the same rank hold the same shard: one write per rank
    const byRank = new Map<number, number[]>();
    for (const r of replicas ?? Array.from({ length: R }, (_, i) => i)) {
      const k = rankInGroup(device.group, R, r);
      byRank.set(k, [...(byRank.get(k) ?? []), r]);
    }
    for (const [k, rs] of byRank) this.backend!.write(device.name, shardOfTensor(value, sharded.parts, k), rs.length === R ? undefined : rs);
  }

  /** Reads a tensor from the device as the host sees it: one value, or one per group / replica. */
  private readFromDevice(name: string): Tensor {
    const v = this.weightInfo(name);
    const perReplica = this.readReplicas(v);
    const R = this.module!.replicationFactor;
    const groups = replicaGroups(v.group, R);
    if (v.retrieval === 'all_replicas' && R > 1) return stack(perReplica);
    if (groups.length === 1) return perReplica[0]!;
    return stack(groups.map((members) => perReplica[members[0]!]!));
  }

  private writeToDevice(name: string, t: Tensor): void {
    const v = this.weightInfo(name);
    const R = this.module!.replicationFactor;
    const { type } = hostStorage(this.module!, v);
    if (t.dtype === type.dtype && shapesEqual(t.shape, type.shape)) {
      this.writeReplicas(v, t);
      return;
    }
    const groups = replicaGroups(v.group, R);
    const lead = t.shape[0];
    const rest = t.shape.slice(1);
    if (t.dtype === type.dtype && shapesEqual(rest, type.shape) && (lead === groups.length || (lead === R && v.retrieval === 'all_replicas'))) {
      const parts = unstack(t);
      if (lead === groups.length) groups.forEach((members, g) => this.writeReplicas(v, parts[g]!, members));
      else parts.forEach((p, r) => this.writeReplicas(v, p, [r]));
      return;
    }
    throw new DiagnosticError(
      error(`'${name}' is ${type.dtype}${formatShape(type.shape)}${groups.length > 1 ? ` in ${groups.length} replica groups` : ''}; cannot load ${t.dtype}${formatShape(t.shape)}`),
    );
  }

  /** Copies the weights from the device to the host copy. */
  copyWeightsToHost(): void {
    this.compile();
    for (const v of hostVariables(this.module!)) if (v.role === 'weight') this.host.set(v.name, this.readFromDevice(v.name));
    this.hostDirty = false;
  }

  /** Copies the host copy of the weights to the device. */
  copyWeightsToDevice(): void {
    this.compile();
    for (const [name, t] of this.host) this.writeToDevice(name, t);
    this.hostDirty = false;
  }

  /** The weights by name, read from the device (like model.state_dict() after a PopTorch run). */
  stateDict(): Record<string, Tensor> {
    this.copyWeightsToHost();
    return Object.fromEntries(this.host);
  }

  /** Any device tensor by name (weights, optimizer state, accumulators), as the host sees it. */
  readTensor(name: string): Tensor {
    return this.readFromDevice(name);
  }

  /** Host variables besides the weights that carry over between runs; hyperparameters come from the optimizer instead. */
  private optimizerStateNames(): string[] {
    this.compile();
    return hostVariables(this.module!)
      .filter((v) => v.role !== 'weight' && v.role !== 'hyperparameter')
      .map((v) => v.name);
  }

  /**
   * The device state a checkpoint keeps besides the weights, by name: optimizer slots (momenta),
   * step counters and gradient accumulators. With stateDict, enough to resume training exactly.
   */
  optimizerStateDict(): Record<string, Tensor> {
    return Object.fromEntries(this.optimizerStateNames().map((n) => [n, this.readFromDevice(n)]));
  }

  /** Restores what optimizerStateDict returned: the same names, each of its type. */
  loadOptimizerStateDict(dict: Readonly<Record<string, Tensor>>): void {
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
    this.compile();
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

/** The options a compiled step depends on (the output mode is applied on the host and may change). */
function compiledOptions(o: Options): Record<string, unknown> {
  const j = o.toJSON();
  return {
    deviceIterations: j.device_iterations,
    replicationFactor: j.replication_factor,
    inputReplicaGrouping: [j.input_group_size, j.input_group_type],
    anchorTensor: j.anchored_tensors,
    randomSeed: j.random_seed,
    autoRecomputation: j.auto_recomputation,
    Training: j.Training,
    TensorLocations: j.TensorLocations,
  };
}

function stack(ts: readonly Tensor[]): Tensor {
  const first = ts[0]!;
  const data = allocData(first.dtype, first.size * ts.length);
  ts.forEach((t, i) => data.set(t.data as never, i * first.size));
  return new Tensor(first.dtype, [ts.length, ...first.shape], data);
}

function unstack(t: Tensor): Tensor[] {
  const n = t.shape[0]!;
  const shape = t.shape.slice(1);
  const size = t.size / n;
  return Array.from({ length: n }, (_, i) => new Tensor(t.dtype, shape, t.data.slice(i * size, (i + 1) * size)));
}

export class InferenceModel extends PoplarExecutor {
  readonly kind = 'inference';
  protected get outputGraph(): string {
    return 'forward';
  }
  protected buildModule(step: StepSettings): Module {
    return buildInferenceModule(withAnchors(this.model, this.options), step, this.warnings);
  }
}

export class TrainingModel extends PoplarExecutor {
  readonly kind = 'training';
  private optimizer: OptimizerSpec;
  private lossName = 'loss';
  /** Time spent in each compile pass (after compile). */
  passTimings: readonly PassTiming[] = [];

  constructor(model: Graph, options: Options, optimizer: OptimizerSpec, settings: ExecutorSettings = {}) {
    super(model, options, settings);
    this.optimizer = optimizer;
  }
  protected get outputGraph(): string {
    return 'step';
  }
  get lossOutput(): string {
    return this.lossName;
  }
  protected buildModule(step: StepSettings): Module {
    const t = buildTrainingModule(withAnchors(this.model, this.options), step, this.optimizer, this.settings.passes ?? {});
    this.lossName = t.lossOutput;
    this.passTimings = t.timings;
    this.warnings.push(...t.diagnostics);
    return t.module;
  }

  /** The optimizer currently in use. */
  get currentOptimizer(): OptimizerSpec {
    return this.optimizer;
  }

  /**
   * Changes hyperparameters without recompiling (they live in device variables). Changes that
   * alter the structure of the update — a momentum turned on, clipping turned on, a different
   * optimizer type or a constant hyperparameter — need a new model.
   */
  setOptimizer(next: OptimizerSpec | Readonly<Record<string, number>>): void {
    const cur = this.optimizer;
    const spec = 'type' in next && typeof next.type === 'string' ? (next as OptimizerSpec) : updateHyper(cur, next as Record<string, number>);
    const problems: string[] = [];
    if (spec.type !== cur.type) problems.push(`the optimizer type changes from ${cur.type} to ${spec.type}`);
    for (const [k, v] of Object.entries(spec.flags)) if (cur.flags[k] !== v) problems.push(`${k} changes from ${cur.flags[k]} to ${v}`);
    // element types of the accumulator and momenta are fixed in the compiled step
    for (const [label, key] of [
      ['accum_type', 'accumType'],
      ['first_order_momentum_accum_type', 'firstOrderMomentumAccumType'],
      ['second_order_momentum_accum_type', 'secondOrderMomentumAccumType'],
    ] as const) {
      if (spec[key] !== cur[key]) problems.push(`${label} changes from ${cur[key]} to ${spec[key]}`);
    }
    const madeConstant = spec.constant.filter((k) => !cur.constant.includes(k));
    const madeVariable = cur.constant.filter((k) => !spec.constant.includes(k));
    if (madeConstant.length) problems.push(`${madeConstant.join(', ')} would become constant`);
    if (madeVariable.length) problems.push(`${madeVariable.join(', ')} was marked constant and would become variable`);
    for (const [k, v] of Object.entries(spec.hyper)) {
      const old = cur.hyper[k]!;
      if (cur.constant.includes(k) && v !== old) problems.push(`${k} was marked constant`);
      if ((k === 'momentum' || k === 'max_grad_norm' || k === 'max_weight_norm') && (old === 0 || !Number.isFinite(old)) !== (v === 0 || !Number.isFinite(v))) {
        problems.push(`${k} changes from ${old} to ${v}, which changes the update's structure`);
      }
    }
    if (problems.length) throw new DiagnosticError(error('setOptimizer: this change needs a recompilation (create a new trainingModel)', undefined, problems));
    this.optimizer = spec;
    if (!this.module) return;
    for (const [k, v] of Object.entries(spec.hyper)) {
      const name = `optimizer.${k}`;
      if (this.module.variables.has(name)) this.backend!.write(name, Tensor.scalar('float32', v));
    }
  }
}

/** A copy of the graph with outputs `anchor:<name>` for every anchored tensor (Options.anchorTensor). */
function withAnchors(g: Graph, o: Options): Graph {
  const anchors = Object.entries(o.anchored_tensors);
  if (anchors.length === 0) return g;
  g = cloneGraph(g).graph;
  const byName = new Map<string, import('@tilegraph/ir').Value>();
  for (const v of g.values()) if (v.name) byName.set(v.name, v);
  for (const [name, a] of anchors) {
    const v = byName.get(a.path);
    if (!v) throw new DiagnosticError(error(`anchorTensor '${name}': the model has no tensor named '${a.path}'`));
    if (!g.outputs.some((x) => x.name === `anchor:${name}`)) g.addOutput(`anchor:${name}`, v);
  }
  return g;
}

/** PopTorch's trainingModel: the step (forward, loss, backward, reduction, update) runs on the device. */
export function trainingModel(model: Graph, options: Options, optimizer: OptimizerSpec, settings: ExecutorSettings = {}): TrainingModel {
  return new TrainingModel(model, options, optimizer, settings);
}

/** PopTorch's inferenceModel. */
export function inferenceModel(model: Graph, options: Options, settings: ExecutorSettings = {}): InferenceModel {
  return new InferenceModel(model, options, settings);
}
