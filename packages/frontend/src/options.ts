/**
 * Options: everything that controls how a model is compiled and run, with the surface of
 * PopTorch's `poptorch.Options` so an IPU user finds what they know.
 *
 * Naming follows PopTorch on both sides of the API:
 * - setters are PopTorch's camelCase methods and return `this` (`opts.deviceIterations(4)`,
 *   `opts.Training.gradientAccumulation(2)`), validating their arguments;
 * - stored values are read through snake_case properties, as PopTorch exposes them
 *   (`opts.device_iterations`, `opts.Training.gradient_accumulation`); the same names are the
 *   keys of `toJSON()` / `Options.fromJSON()`. Values PopTorch keeps inside PopART's session
 *   options get a snake_case name of their own (`executable_cache_dir`, `synthetic_data`,
 *   `profile_dir`, `Precision.stochastic_rounding`, ...).
 *
 * Options files (`loadFromFile`) hold one setter call per line, as PopTorch's do, and are read
 * by a small parser that only knows literals, the enumerations and the option classes below.
 */
import { readFileSync } from 'node:fs';
import { editDistance } from '@tilegraph/ir';
import { MAX_NESTING } from './dsl/parser.js';

// ---------------------------------------------------------------------------------------------
// Errors and argument checks

/** A bad option value: the message names the setter, what was wrong and what is accepted. */
export class OptionsError extends Error {
  /** The setter (or file position) the problem belongs to, when there is one. */
  readonly option: string | undefined;
  /** The column of an options-file line the problem is at, when it has one (reported as file:line:col). */
  col: number | undefined;
  constructor(message: string, option?: string) {
    super(option === undefined ? message : `${option}: ${message}`);
    this.name = 'OptionsError';
    this.option = option;
  }
}

function fmt(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return String(v);
  if (typeof v === 'object') {
    if (!Array.isArray(v) && !isPlainObject(v)) return `a ${(v as object).constructor?.name ?? 'object'}`;
    try {
      return JSON.stringify(v);
    } catch {
      return String(v);
    }
  }
  return typeof v;
}

function checkPositiveInt(option: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) {
    throw new OptionsError(`expected a positive integer, got ${fmt(v)}`, option);
  }
  return v;
}

function checkNonNegativeInt(option: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw new OptionsError(`expected a non-negative integer, got ${fmt(v)}`, option);
  }
  return v;
}

function checkBool(option: string, v: unknown): boolean {
  if (typeof v !== 'boolean') throw new OptionsError(`expected true or false, got ${fmt(v)}`, option);
  return v;
}

function checkNonEmptyString(option: string, v: unknown, what = 'a non-empty string'): string {
  if (typeof v !== 'string' || v === '') throw new OptionsError(`expected ${what}, got ${fmt(v)}`, option);
  return v;
}

function checkEnum<T extends string>(option: string, enumName: string, e: Record<string, T>, v: unknown): T {
  const values = Object.values(e) as string[];
  if (typeof v === 'string' && values.includes(v)) return v as T;
  const accepted = Object.keys(e).map((k) => `${enumName}.${k}`).join(', ');
  throw new OptionsError(`unknown ${enumName} ${fmt(v)}; expected one of ${accepted}`, option);
}

/** An object literal or parsed JSON object, from any realm (jest and vm contexts have their own Object). */
function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as object | null;
  return proto === null || Object.getPrototypeOf(proto) === null;
}

/** A deep copy of JSON-shaped data. */
function copyJSON<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

// ---------------------------------------------------------------------------------------------
// Enumerations (PopTorch's poptorch.enums, values are the member names unless PopTorch uses strings)

/** Which results a run returns to the host. */
export enum OutputMode {
  /** A result for each batch. */
  All = 'All',
  /** The sum of the results of all the batches. */
  Sum = 'Sum',
  /** The result of the last batch. */
  Final = 'Final',
  /** Every N-th batch (N is the return period). */
  EveryN = 'EveryN',
  /** `All` for inference models, `Final` for training models. */
  Default = 'Default',
}

/** Reduction of gradients across accumulation steps and replicas. */
export enum ReductionType {
  Sum = 'Sum',
  Mean = 'Mean',
  NoReduction = 'NoReduction',
}

/** When a mean reduction divides (see POPLAR-NOTES: PopART accumulate semantics). */
export enum MeanReductionStrategy {
  /** Keep the accumulator as the running mean (numerically safest). */
  Running = 'Running',
  /** Sum, then divide once by accumulation factor × replicas. */
  Post = 'Post',
  /** Deprecated in PopTorch: divide by replicas at the loss, by the accumulation factor after. */
  PostAndLoss = 'PostAndLoss',
}

/** How replicas are grouped (GCL CommGroupType). */
export enum CommGroupType {
  /** One group of all replicas (not valid for input grouping). */
  All = 'All',
  /** Groups of consecutive replicas: {0..k-1}, {k..2k-1}, ... */
  Consecutive = 'Consecutive',
  /** Groups strided across replicas: {0, m, 2m, ...}, {1, m+1, ...} with m = N/k. */
  Orthogonal = 'Orthogonal',
  /** Every replica on its own. */
  NoGrouping = 'NoGrouping',
}

/** How a grouped variable is read back from the replicas. */
export enum VariableRetrievalMode {
  /** One value per replica group (from the group's first replica). */
  OnePerGroup = 'OnePerGroup',
  /** One value per group, all-reduced over the group (PopART's AllReduceReplicas; PopTorch does not expose it). */
  AllReduce = 'AllReduce',
  /** One value per replica. */
  AllReplicas = 'AllReplicas',
}

/** IPU synchronisation in multi-IPU systems. */
export enum SyncPattern {
  Full = 'Full',
  SinglePipeline = 'SinglePipeline',
  ReplicaAndLadder = 'ReplicaAndLadder',
}

/** When to attach to the IPU. */
export enum ConnectionType {
  Always = 'Always',
  OnDemand = 'OnDemand',
  Never = 'Never',
}

/** How pipeline stages are numbered for blocks when no explicit stages are given. */
export enum AutoStage {
  /** The stage id is the block's IPU. */
  SameAsIpu = 'SameAsIpu',
  /** Every new block gets the next stage id. */
  AutoIncrement = 'AutoIncrement',
}

/**
 * How a pipelined model's stages share the cycles (TF-IPU's PipelineSchedule). Grouped: PopART's
 * pipeline, each stage once per cycle, forward stages together and backward stages together.
 * Interleaved: each IPU alternates its forward and backward stage, a micro-batch entering every
 * other cycle (fewer activations stashed, slower when forward and backward differ in length).
 * Sequential: one micro-batch through every stage before the next (no overlap, least memory).
 */
export enum PipelineSchedule {
  Grouped = 'Grouped',
  Interleaved = 'Interleaved',
  Sequential = 'Sequential',
}

/** Where tensors live between execution phases. */
export enum Liveness {
  AlwaysLive = 'AlwaysLive',
  OffChipAfterFwd = 'OffChipAfterFwd',
  OffChipAfterFwdNoOverlap = 'OffChipAfterFwdNoOverlap',
  OffChipAfterEachPhase = 'OffChipAfterEachPhase',
}

/** The matmul dimension serialisation splits (PopTorch's string values). */
export enum MatMulSerializationMode {
  InputChannels = 'input_channels',
  ReducingDim = 'reducing_dim',
  OutputChannels = 'output_channels',
  Disabled = 'none',
}

/** How host transfers overlap with compute (PopTorch's string values). */
export enum OverlapMode {
  NoOverlap = 'no_overlap',
  OverlapAccumulationLoop = 'overlap_accumulation_loop',
  OverlapDeviceIterationLoop = 'overlap_device_iteration_loop',
}

/** Casting of ops mixing float16 and float32 operands. */
export enum HalfFloatCastingBehavior {
  FloatDowncastToHalf = 'FloatDowncastToHalf',
  HalfUpcastToFloat = 'HalfUpcastToFloat',
  Default = 'Default',
}

/**
 * PopART's automatic recomputation (`_Popart.set("autoRecomputation", n)`), n the PopART enum
 * integer 0 to 4 in this order.
 */
export enum RecomputationType {
  /** Recompute only ops marked recompute. */
  None = 'None',
  /** Keep what PopART's interval heuristic over the forward schedule picks; recompute the rest. */
  Standard = 'Standard',
  /** Recompute only normalisations. */
  NormOnly = 'NormOnly',
  /** Recompute each pipeline stage but the last from the values entering it. */
  Pipeline = 'Pipeline',
  /** Recompute everything before the last recomputation checkpoint. */
  RecomputeAll = 'RecomputeAll',
}

/** RecomputationType by PopART's integer value. */
const RECOMPUTATION_BY_INT: readonly RecomputationType[] = [
  RecomputationType.None,
  RecomputationType.Standard,
  RecomputationType.NormOnly,
  RecomputationType.Pipeline,
  RecomputationType.RecomputeAll,
];

/** The enumerations an options file may name (`OutputMode.All`, `poptorch.Liveness.AlwaysLive`). */
const FILE_ENUMS: Record<string, Record<string, string>> = {
  OutputMode,
  ReductionType,
  MeanReductionStrategy,
  CommGroupType,
  VariableRetrievalMode,
  SyncPattern,
  ConnectionType,
  AutoStage,
  PipelineSchedule,
  Liveness,
  MatMulSerializationMode,
  OverlapMode,
  HalfFloatCastingBehavior,
  RecomputationType,
};

export type PartialsType = 'float32' | 'float16';
export type ModelKind = 'training' | 'inference';

// ---------------------------------------------------------------------------------------------
// Execution strategies

/** One or more blocks running on one IPU. */
export class Stage {
  readonly blocks: readonly string[];
  private ipuId: number | undefined;

  constructor(...blockIds: string[]) {
    if (blockIds.length === 0) throw new OptionsError('a stage needs at least one block id', 'Stage');
    for (const b of blockIds) {
      if (typeof b !== 'string' || b === '') {
        throw new OptionsError(`block ids must be non-empty strings, got ${fmt(b)}`, 'Stage');
      }
    }
    this.blocks = Object.freeze([...blockIds]);
  }

  /** Run this stage on the given IPU. */
  ipu(ipu: number): this {
    this.ipuId = checkNonNegativeInt('Stage.ipu', ipu);
    return this;
  }

  /** The IPU chosen with `ipu()`, if any. */
  get ipu_id(): number | undefined {
    return this.ipuId;
  }

  toJSON(): StageJSON {
    return this.ipuId === undefined ? { blocks: [...this.blocks] } : { blocks: [...this.blocks], ipu: this.ipuId };
  }

  static fromJSON(v: unknown, where = 'stage'): Stage {
    if (!isPlainObject(v) || !Array.isArray(v['blocks'])) {
      throw new OptionsError(`expected {"blocks": [...], "ipu"?: n}, got ${fmt(v)}`, where);
    }
    checkKeys(v, ['blocks', 'ipu'], where);
    const s = new Stage(...(v['blocks'] as string[]));
    if (v['ipu'] !== undefined) s.ipu(v['ipu'] as number);
    return s;
  }

  describe(): string {
    const head = `Stage(${this.blocks.map((b) => JSON.stringify(b)).join(', ')})`;
    return this.ipuId === undefined ? head : `${head}.ipu(${this.ipuId})`;
  }
}

/** An execution phase: stages that run in parallel. */
export class Phase {
  readonly stages: readonly Stage[];

  /** `Phase(stage, stage, ...)`, or `Phase('A', 'B')` for one stage made of blocks A and B. */
  constructor(...args: (Stage | string)[]) {
    if (args.length === 0) throw new OptionsError('a phase needs at least one stage or block id', 'Phase');
    if (args.every((a) => a instanceof Stage)) {
      this.stages = Object.freeze([...(args as Stage[])]);
    } else if (args.every((a) => typeof a === 'string')) {
      this.stages = Object.freeze([new Stage(...(args as string[]))]);
    } else {
      throw new OptionsError(
        `arguments must be all Stages or all block ids (strings), got ${args.map(fmt).join(', ')}`,
        'Phase',
      );
    }
  }

  stage(idx: number): Stage {
    const s = this.stages[idx];
    if (s === undefined) {
      throw new OptionsError(`no stage ${fmt(idx)}; this phase has ${this.stages.length} stage(s)`, 'Phase.stage');
    }
    return s;
  }

  /** One IPU per stage of this phase. */
  ipus(...ipus: number[]): this {
    if (ipus.length !== this.stages.length) {
      throw new OptionsError(
        `the phase has ${this.stages.length} stage(s) but ${ipus.length} IPU(s) were given; give one IPU per stage`,
        'Phase.ipus',
      );
    }
    ipus.forEach((ipu, i) => this.stages[i]!.ipu(ipu));
    return this;
  }

  toJSON(): { stages: StageJSON[] } {
    return { stages: this.stages.map((s) => s.toJSON()) };
  }

  describe(): string {
    return `Phase(${this.stages.map((s) => s.describe()).join(', ')})`;
  }
}

export interface StageJSON {
  blocks: string[];
  ipu?: number;
}

export type ExecutionStrategyJSON =
  | { type: 'PipelinedExecution' | 'ShardedExecution'; auto_stage: AutoStage; stages: StageJSON[]; pipeline_schedule?: PipelineSchedule }
  | {
      type: 'SerialPhasedExecution' | 'ParallelPhasedExecution';
      phases: { stages: StageJSON[] }[];
      separate_backward_phase: boolean;
      tensors_liveness: Liveness;
    };

/** Where a block runs under a strategy. Undefined fields are decided when the model is built. */
export interface BlockPlacement {
  stage?: number;
  phase?: number;
  ipu?: number;
}

/** How the model's blocks are split across IPUs, stages and phases. */
export abstract class ExecutionStrategy {
  abstract readonly type: ExecutionStrategyJSON['type'];
  /** The stage a block belongs to, or undefined when blocks are staged automatically. */
  abstract stage(blockId: string): Stage | undefined;
  abstract placement(blockId: string): BlockPlacement | undefined;
  abstract toJSON(): ExecutionStrategyJSON;
  /** The strategy as an options-file expression. */
  abstract describe(): string;
}

function stageFromArg(arg: unknown, where: string): Stage {
  if (arg instanceof Stage) return arg;
  if (typeof arg === 'string') return new Stage(arg);
  if (Array.isArray(arg) && arg.every((a) => typeof a === 'string')) return new Stage(...(arg as string[]));
  throw new OptionsError(`expected a Stage, a block id or a list of block ids, got ${fmt(arg)}`, where);
}

function registerBlocks(map: Map<string, Stage>, stage: Stage, where: string): void {
  for (const b of stage.blocks) {
    if (map.has(b)) throw new OptionsError(`block ${JSON.stringify(b)} is in more than one stage`, where);
    map.set(b, stage);
  }
}

/**
 * Pipelined execution: each stage runs on its IPU and micro-batches flow through the stages.
 * With no arguments (or a single AutoStage) every block met while building the model becomes a
 * stage; otherwise the arguments list the stages in order. A lone argument equal to an AutoStage
 * value is read as the AutoStage — wrap such a block name in `new Stage(...)`.
 */
export class PipelinedExecution extends ExecutionStrategy {
  override get type(): 'PipelinedExecution' | 'ShardedExecution' {
    return 'PipelinedExecution';
  }
  readonly auto_stage: AutoStage;
  readonly stages: readonly Stage[];
  private readonly blockMap = new Map<string, Stage>();
  private schedule: PipelineSchedule = PipelineSchedule.Grouped;

  constructor(...args: (AutoStage | Stage | string | string[])[]) {
    super();
    const where = new.target.name;
    const autoValues = Object.values(AutoStage) as string[];
    if (args.length === 1 && typeof args[0] === 'string' && autoValues.includes(args[0])) {
      this.auto_stage = args[0] as AutoStage;
      this.stages = Object.freeze([]);
      return;
    }
    this.auto_stage = AutoStage.SameAsIpu;
    const stages = args.map((a) => stageFromArg(a, where));
    for (const s of stages) registerBlocks(this.blockMap, s, where);
    this.stages = Object.freeze(stages);
  }

  /**
   * The stage of a block. With automatic staging the stage is made on first request, as in
   * PopTorch, so that `strategy.stage("B").ipu(1)` places block B on IPU 1.
   */
  override stage(blockId: string): Stage | undefined {
    const known = this.blockMap.get(blockId);
    if (known || this.stages.length > 0) return known;
    const s = new Stage(blockId);
    this.blockMap.set(blockId, s);
    return s;
  }

  /** The pipeline schedule (default PipelineSchedule.Grouped): see PipelineSchedule. */
  setPipelineSchedule(schedule: PipelineSchedule): this {
    this.schedule = checkEnum(`${this.type}.setPipelineSchedule`, 'PipelineSchedule', PipelineSchedule, schedule);
    return this;
  }

  get pipeline_schedule(): PipelineSchedule {
    return this.schedule;
  }

  /** With automatic staging: the blocks given an IPU through `stage(id).ipu(n)`. */
  get auto_stage_ipus(): ReadonlyMap<string, number> {
    const out = new Map<string, number>();
    if (this.stages.length === 0) for (const [b, s] of this.blockMap) if (s.ipu_id !== undefined) out.set(b, s.ipu_id);
    return out;
  }

  override placement(blockId: string): BlockPlacement | undefined {
    if (this.stages.length === 0) return undefined;
    const s = this.blockMap.get(blockId);
    if (s === undefined) return undefined;
    const p: BlockPlacement = { stage: this.stages.indexOf(s) };
    if (s.ipu_id !== undefined) p.ipu = s.ipu_id;
    return p;
  }

  override toJSON(): ExecutionStrategyJSON {
    const j: ExecutionStrategyJSON = { type: this.type, auto_stage: this.auto_stage, stages: this.stages.map((s) => s.toJSON()) };
    return this.schedule === PipelineSchedule.Grouped ? j : { ...j, pipeline_schedule: this.schedule };
  }

  override describe(): string {
    const sched = this.schedule === PipelineSchedule.Grouped ? '' : `.setPipelineSchedule(PipelineSchedule.${this.schedule})`;
    if (this.stages.length === 0) {
      return (this.auto_stage === AutoStage.SameAsIpu ? `${this.type}()` : `${this.type}(AutoStage.${this.auto_stage})`) + sched;
    }
    return `${this.type}(${this.stages.map((s) => s.describe()).join(', ')})${sched}`;
  }
}

/** Sharded execution: stages run one after the other, each on its IPU (no pipelining). */
export class ShardedExecution extends PipelinedExecution {
  override get type(): 'ShardedExecution' {
    return 'ShardedExecution';
  }

  /** Refused: sharded stages run one after another, which no schedule changes. */
  override setPipelineSchedule(schedule: PipelineSchedule): this {
    throw new OptionsError(
      `ShardedExecution runs its stages one after another; a pipeline schedule (${fmt(schedule)}) applies to PipelinedExecution`,
      'ShardedExecution.setPipelineSchedule',
    );
  }
}

/** A phase: a Phase, a Stage, a block id, or a list of Stages / block ids (one stage per id list). */
type PhaseArg = Phase | Stage | string | (Stage | string)[];

/** Phased execution: the model runs phase by phase, moving tensors on and off chip between phases. */
export abstract class PhasedExecution extends ExecutionStrategy {
  abstract override readonly type: 'SerialPhasedExecution' | 'ParallelPhasedExecution';
  readonly phases: readonly Phase[];
  protected liveness: Liveness = Liveness.AlwaysLive;
  private separateBackward = false;
  private readonly blockMap = new Map<string, { stage: Stage; phase: number }>();

  /**
   * Phases as Phase objects, lists of Stages, or lists of block ids (one stage per list);
   * a single list of Phases is also accepted. Phased execution has no automatic staging.
   */
  constructor(phases: Phase[]);
  constructor(...args: PhaseArg[]);
  constructor(...args: (PhaseArg | Phase[])[]) {
    super();
    const where = new.target.name;
    if (args.length === 1 && Array.isArray(args[0]) && args[0].length > 0 && args[0].every((a) => a instanceof Phase)) {
      args = args[0] as unknown as Phase[];
    }
    if (args.length === 0) {
      throw new OptionsError('phased execution has no automatic staging; list the phases explicitly', where);
    }
    const phases = args.map((a) => {
      if (a instanceof Phase) return a;
      const items = Array.isArray(a) ? a : [a];
      try {
        return new Phase(...(items as (Stage | string)[]));
      } catch {
        throw new OptionsError(`each phase must be a Phase, a list of Stages or a list of block ids, got ${fmt(a)}`, where);
      }
    });
    phases.forEach((p, i) => {
      for (const s of p.stages) {
        for (const b of s.blocks) {
          if (this.blockMap.has(b)) throw new OptionsError(`block ${JSON.stringify(b)} is in more than one stage`, where);
          this.blockMap.set(b, { stage: s, phase: i });
        }
      }
    });
    this.phases = Object.freeze(phases);
  }

  phase(idx: number): Phase {
    const p = this.phases[idx];
    if (p === undefined) {
      throw new OptionsError(`no phase ${fmt(idx)}; there are ${this.phases.length} phase(s)`, `${this.type}.phase`);
    }
    return p;
  }

  /**
   * Give the backward pass phases of its own. By default the last forward phase and the first
   * backward phase are the same phase (3 forward phases 0,1,2 → backward 2,3,4); with a separate
   * backward phase they are not (→ backward 4,5,6).
   */
  useSeparateBackwardPhase(use = true): this {
    this.separateBackward = checkBool(`${this.type}.useSeparateBackwardPhase`, use);
    return this;
  }

  get separate_backward_phase(): boolean {
    return this.separateBackward;
  }

  get tensors_liveness(): Liveness {
    return this.liveness;
  }

  override stage(blockId: string): Stage | undefined {
    return this.blockMap.get(blockId)?.stage;
  }

  override placement(blockId: string): BlockPlacement | undefined {
    const e = this.blockMap.get(blockId);
    if (e === undefined) return undefined;
    const p: BlockPlacement = { phase: e.phase, stage: this.phases[e.phase]!.stages.indexOf(e.stage) };
    if (e.stage.ipu_id !== undefined) p.ipu = e.stage.ipu_id;
    return p;
  }

  override toJSON(): ExecutionStrategyJSON {
    return {
      type: this.type,
      phases: this.phases.map((p) => p.toJSON()),
      separate_backward_phase: this.separateBackward,
      tensors_liveness: this.liveness,
    };
  }

  protected abstract livenessCall(): string | undefined;

  override describe(): string {
    let s = `${this.type}(${this.phases.map((p) => p.describe()).join(', ')})`;
    const l = this.livenessCall();
    if (l !== undefined) s += l;
    if (this.separateBackward) s += '.useSeparateBackwardPhase(True)';
    return s;
  }
}

/** All phases run one after the other on the same group of IPUs. */
export class SerialPhasedExecution extends PhasedExecution {
  override get type(): 'SerialPhasedExecution' {
    return 'SerialPhasedExecution';
  }

  setTensorsLiveness(liveness: Liveness): this {
    this.liveness = checkEnum('SerialPhasedExecution.setTensorsLiveness', 'Liveness', Liveness, liveness);
    return this;
  }

  protected override livenessCall(): string | undefined {
    return this.liveness === Liveness.AlwaysLive ? undefined : `.setTensorsLiveness(Liveness.${this.liveness})`;
  }
}

/** Phases alternate between two groups of IPUs, so one group computes while the other loads. */
export class ParallelPhasedExecution extends PhasedExecution {
  override get type(): 'ParallelPhasedExecution' {
    return 'ParallelPhasedExecution';
  }

  /** Send tensors off chip after the forward pass (Liveness.OffChipAfterFwd) or keep them (AlwaysLive). */
  sendTensorsOffChipAfterFwd(offChip = true): this {
    const v = checkBool('ParallelPhasedExecution.sendTensorsOffChipAfterFwd', offChip);
    this.liveness = v ? Liveness.OffChipAfterFwd : Liveness.AlwaysLive;
    return this;
  }

  protected override livenessCall(): string | undefined {
    return this.liveness === Liveness.AlwaysLive ? undefined : '.sendTensorsOffChipAfterFwd(True)';
  }
}

function checkKeys(obj: Record<string, unknown>, accepted: readonly string[], where: string): void {
  for (const k of Object.keys(obj)) {
    if (!accepted.includes(k)) {
      throw new OptionsError(`unknown key ${JSON.stringify(k)}; accepted keys are ${accepted.join(', ')}`, where);
    }
  }
}

/** Rebuild a strategy from its `toJSON()` form. */
export function executionStrategyFromJSON(v: unknown, where = 'execution_strategy'): ExecutionStrategy {
  if (!isPlainObject(v)) throw new OptionsError(`expected an execution strategy object, got ${fmt(v)}`, where);
  const type = v['type'];
  if (type === 'PipelinedExecution' || type === 'ShardedExecution') {
    checkKeys(v, ['type', 'auto_stage', 'stages', 'pipeline_schedule'], where);
    const stages = v['stages'] ?? [];
    if (!Array.isArray(stages)) throw new OptionsError(`"stages" must be a list, got ${fmt(stages)}`, where);
    const Ctor = type === 'PipelinedExecution' ? PipelinedExecution : ShardedExecution;
    let st: PipelinedExecution;
    if (stages.length === 0) {
      const auto = checkEnum(`${where}.auto_stage`, 'AutoStage', AutoStage, v['auto_stage'] ?? AutoStage.SameAsIpu);
      st = new Ctor(auto);
    } else st = new Ctor(...stages.map((s, i) => Stage.fromJSON(s, `${where}.stages[${i}]`)));
    if (v['pipeline_schedule'] !== undefined) {
      const sched = checkEnum(`${where}.pipeline_schedule`, 'PipelineSchedule', PipelineSchedule, v['pipeline_schedule']);
      if (sched !== PipelineSchedule.Grouped || type === 'PipelinedExecution') st.setPipelineSchedule(sched);
    }
    return st;
  }
  if (type === 'SerialPhasedExecution' || type === 'ParallelPhasedExecution') {
    checkKeys(v, ['type', 'phases', 'separate_backward_phase', 'tensors_liveness'], where);
    const phases = v['phases'];
    if (!Array.isArray(phases)) throw new OptionsError(`"phases" must be a list, got ${fmt(phases)}`, where);
    const ps = phases.map((p, i) => {
      const w = `${where}.phases[${i}]`;
      if (!isPlainObject(p) || !Array.isArray(p['stages'])) {
        throw new OptionsError(`expected {"stages": [...]}, got ${fmt(p)}`, w);
      }
      checkKeys(p, ['stages'], w);
      return new Phase(...(p['stages'] as unknown[]).map((s, j) => Stage.fromJSON(s, `${w}.stages[${j}]`)));
    });
    const liveness = checkEnum(`${where}.tensors_liveness`, 'Liveness', Liveness, v['tensors_liveness'] ?? Liveness.AlwaysLive);
    let s: PhasedExecution;
    if (type === 'SerialPhasedExecution') {
      s = new SerialPhasedExecution(...ps).setTensorsLiveness(liveness);
    } else {
      if (liveness !== Liveness.AlwaysLive && liveness !== Liveness.OffChipAfterFwd) {
        throw new OptionsError(
          `ParallelPhasedExecution supports Liveness.AlwaysLive or Liveness.OffChipAfterFwd, got Liveness.${liveness}`,
          `${where}.tensors_liveness`,
        );
      }
      s = new ParallelPhasedExecution(...ps).sendTensorsOffChipAfterFwd(liveness === Liveness.OffChipAfterFwd);
    }
    if (v['separate_backward_phase'] !== undefined) s.useSeparateBackwardPhase(v['separate_backward_phase'] as boolean);
    return s;
  }
  throw new OptionsError(
    `unknown strategy type ${fmt(type)}; ` +
      'expected PipelinedExecution, ShardedExecution, SerialPhasedExecution or ParallelPhasedExecution',
    where,
  );
}

// ---------------------------------------------------------------------------------------------
// Tensor locations

/** Settings for one class of tensors (activations, weights, optimiser state, accumulators). */
export interface TensorLocationValues {
  /** true: on-chip memory; false: off-chip (streaming) memory; absent: the compiler decides. */
  onChip?: boolean;
  useReplicatedTensorSharding?: boolean;
  minElementsForOffChip?: number;
  minElementsForReplicatedTensorSharding?: number;
  useIOTilesToLoad?: boolean;
  useIOTilesToStore?: boolean;
}

const LOCATION_KEYS: readonly (keyof TensorLocationValues)[] = [
  'onChip',
  'useReplicatedTensorSharding',
  'minElementsForOffChip',
  'minElementsForReplicatedTensorSharding',
  'useIOTilesToLoad',
  'useIOTilesToStore',
];

/** Where a class of tensors is stored; pass to the `TensorLocations.set*Location` setters. */
export class TensorLocationSettings {
  private v: TensorLocationValues = {};

  /** Below this many elements a tensor is never moved off chip. */
  minElementsForOffChip(minElements: number): this {
    this.v.minElementsForOffChip = checkNonNegativeInt('TensorLocationSettings.minElementsForOffChip', minElements);
    return this;
  }

  /** Only shard (RTS) tensors with more than this many elements. */
  minElementsForReplicatedTensorSharding(minElements: number): this {
    this.v.minElementsForReplicatedTensorSharding = checkNonNegativeInt(
      'TensorLocationSettings.minElementsForReplicatedTensorSharding',
      minElements,
    );
    return this;
  }

  /** true: on-chip memory; false: off-chip memory; null: leave it to the compiler. */
  useOnChipStorage(use: boolean | null = true): this {
    if (use === null) delete this.v.onChip;
    else this.v.onChip = checkBool('TensorLocationSettings.useOnChipStorage', use);
    return this;
  }

  /** Shard the tensor across replicas (weights and optimiser state). */
  useReplicatedTensorSharding(use = true): this {
    this.v.useReplicatedTensorSharding = checkBool('TensorLocationSettings.useReplicatedTensorSharding', use);
    return this;
  }

  /** Load the tensor through IO tiles instead of compute tiles. */
  useIOTilesToLoad(use = true): this {
    this.v.useIOTilesToLoad = checkBool('TensorLocationSettings.useIOTilesToLoad', use);
    return this;
  }

  /** Store the tensor through IO tiles (relevant for sharded tensors). */
  useIOTilesToStore(use = true): this {
    this.v.useIOTilesToStore = checkBool('TensorLocationSettings.useIOTilesToStore', use);
    return this;
  }

  /** The settings made so far, as a plain object. */
  toDict(): TensorLocationValues {
    return { ...this.v };
  }

  static fromDict(v: unknown, where = 'TensorLocationSettings'): TensorLocationSettings {
    if (!isPlainObject(v)) throw new OptionsError(`expected a tensor location object, got ${fmt(v)}`, where);
    checkKeys(v, LOCATION_KEYS, where);
    const s = new TensorLocationSettings();
    if (v['onChip'] !== undefined) s.useOnChipStorage(v['onChip'] as boolean);
    if (v['useReplicatedTensorSharding'] !== undefined) {
      s.useReplicatedTensorSharding(v['useReplicatedTensorSharding'] as boolean);
    }
    if (v['minElementsForOffChip'] !== undefined) s.minElementsForOffChip(v['minElementsForOffChip'] as number);
    if (v['minElementsForReplicatedTensorSharding'] !== undefined) {
      s.minElementsForReplicatedTensorSharding(v['minElementsForReplicatedTensorSharding'] as number);
    }
    if (v['useIOTilesToLoad'] !== undefined) s.useIOTilesToLoad(v['useIOTilesToLoad'] as boolean);
    if (v['useIOTilesToStore'] !== undefined) s.useIOTilesToStore(v['useIOTilesToStore'] as boolean);
    return s;
  }

  /** The settings as an options-file expression. */
  describe(): string {
    const v = this.v;
    let s = 'TensorLocationSettings()';
    if (v.onChip !== undefined) s += `.useOnChipStorage(${pyBool(v.onChip)})`;
    if (v.useReplicatedTensorSharding !== undefined) {
      s += `.useReplicatedTensorSharding(${pyBool(v.useReplicatedTensorSharding)})`;
    }
    if (v.minElementsForOffChip !== undefined) s += `.minElementsForOffChip(${v.minElementsForOffChip})`;
    if (v.minElementsForReplicatedTensorSharding !== undefined) {
      s += `.minElementsForReplicatedTensorSharding(${v.minElementsForReplicatedTensorSharding})`;
    }
    if (v.useIOTilesToLoad !== undefined) s += `.useIOTilesToLoad(${pyBool(v.useIOTilesToLoad)})`;
    if (v.useIOTilesToStore !== undefined) s += `.useIOTilesToStore(${pyBool(v.useIOTilesToStore)})`;
    return s;
  }
}

function pyBool(b: boolean): string {
  return b ? 'True' : 'False';
}

// ---------------------------------------------------------------------------------------------
// Option groups

export interface TrainingJSON {
  gradient_accumulation: number;
  accumulation_and_replication_reduction_type: ReductionType;
  mean_accumulation_and_replication_reduction_strategy: MeanReductionStrategy;
  automatic_loss_scaling: boolean;
  convolution_dithering: boolean;
}

/** Options for training models (`opts.Training`). Do not set them for inference models. */
export class TrainingOptions {
  private v: TrainingJSON = {
    gradient_accumulation: 1,
    accumulation_and_replication_reduction_type: ReductionType.Mean,
    mean_accumulation_and_replication_reduction_strategy: MeanReductionStrategy.Post,
    automatic_loss_scaling: false,
    convolution_dithering: false,
  };
  private strategySet = false;

  /** Micro-batches whose gradients are accumulated before each weight update. */
  gradientAccumulation(n: number): this {
    this.v.gradient_accumulation = checkPositiveInt('Training.gradientAccumulation', n);
    return this;
  }

  /** Reduce accumulated and replicated gradients by Mean (default) or Sum. */
  accumulationAndReplicationReductionType(reductionType: ReductionType): this {
    const option = 'Training.accumulationAndReplicationReductionType';
    const r = checkEnum(option, 'ReductionType', ReductionType, reductionType);
    if (r === ReductionType.NoReduction) {
      throw new OptionsError(
        'ReductionType.NoReduction is not allowed; expected ReductionType.Mean or ReductionType.Sum',
        option,
      );
    }
    this.v.accumulation_and_replication_reduction_type = r;
    return this;
  }

  /** When a Mean reduction divides: Running, Post (default) or PostAndLoss (deprecated). */
  setMeanAccumulationAndReplicationReductionStrategy(strategy: MeanReductionStrategy): this {
    this.strategySet = true;
    this.v.mean_accumulation_and_replication_reduction_strategy = checkEnum(
      'Training.setMeanAccumulationAndReplicationReductionStrategy',
      'MeanReductionStrategy',
      MeanReductionStrategy,
      strategy,
    );
    return this;
  }

  /** Let the compiler pick and adjust the loss scaling factor during training. */
  setAutomaticLossScaling(enabled: boolean): this {
    this.v.automatic_loss_scaling = checkBool('Training.setAutomaticLossScaling', enabled);
    return this;
  }

  /** Lay convolutions with different parameters out from different tiles. */
  setConvolutionDithering(enabled: boolean): this {
    this.v.convolution_dithering = checkBool('Training.setConvolutionDithering', enabled);
    return this;
  }

  get gradient_accumulation(): number {
    return this.v.gradient_accumulation;
  }
  get accumulation_and_replication_reduction_type(): ReductionType {
    return this.v.accumulation_and_replication_reduction_type;
  }
  get mean_accumulation_and_replication_reduction_strategy(): MeanReductionStrategy {
    return this.v.mean_accumulation_and_replication_reduction_strategy;
  }
  /**
   * Whether the strategy was set explicitly. When it was not, training follows PopTorch:
   * Running when the optimizer's accumulator type is float16, Post otherwise.
   */
  get mean_strategy_explicit(): boolean {
    return this.strategySet;
  }
  get automatic_loss_scaling(): boolean {
    return this.v.automatic_loss_scaling;
  }
  get convolution_dithering(): boolean {
    return this.v.convolution_dithering;
  }

  toJSON(): TrainingJSON {
    const out: Partial<TrainingJSON> = { ...this.v };
    // an unset strategy stays unset through JSON, so the float16 default still applies
    if (!this.strategySet) delete out.mean_accumulation_and_replication_reduction_strategy;
    return out as TrainingJSON;
  }
}

export interface PrecisionJSON {
  half_float_casting: HalfFloatCastingBehavior;
  running_statistics_always_float: boolean;
  partials_type: PartialsType;
  stochastic_rounding: boolean;
  floating_point_exceptions: boolean;
}

/** Options about numeric precision (`opts.Precision`). */
export class PrecisionOptions {
  private v: PrecisionJSON = {
    half_float_casting: HalfFloatCastingBehavior.Default,
    running_statistics_always_float: true,
    partials_type: 'float32',
    stochastic_rounding: false,
    floating_point_exceptions: false,
  };

  /**
   * Casting of ops mixing float16 and float32 operands: FloatDowncastToHalf casts all operands
   * to float16; HalfUpcastToFloat follows PyTorch's promotion to float32; Default is
   * FloatDowncastToHalf for traced models (PopTorch's rule).
   */
  halfFloatCasting(behavior: HalfFloatCastingBehavior): this {
    const option = 'Precision.halfFloatCasting';
    this.v.half_float_casting = checkEnum(option, 'HalfFloatCastingBehavior', HalfFloatCastingBehavior, behavior);
    return this;
  }

  /** Keep batch-norm running mean and variance in float32 whatever the input type (default true). */
  runningStatisticsAlwaysFloat(value: boolean): this {
    this.v.running_statistics_always_float = checkBool('Precision.runningStatisticsAlwaysFloat', value);
    return this;
  }

  /** Data type of the partial sums of matmuls and convolutions. */
  setPartialsType(dtype: PartialsType): this {
    if (dtype !== 'float32' && dtype !== 'float16') {
      throw new OptionsError(`expected 'float32' or 'float16', got ${fmt(dtype)}`, 'Precision.setPartialsType');
    }
    this.v.partials_type = dtype;
    return this;
  }

  /** Round float16 results stochastically (hardware only). */
  enableStochasticRounding(enabled: boolean): this {
    this.v.stochastic_rounding = checkBool('Precision.enableStochasticRounding', enabled);
    return this;
  }

  /** Raise on IPU floating-point exceptions (hardware only). */
  enableFloatingPointExceptions(enabled: boolean): this {
    this.v.floating_point_exceptions = checkBool('Precision.enableFloatingPointExceptions', enabled);
    return this;
  }

  get half_float_casting(): HalfFloatCastingBehavior {
    return this.v.half_float_casting;
  }
  get running_statistics_always_float(): boolean {
    return this.v.running_statistics_always_float;
  }
  get partials_type(): PartialsType {
    return this.v.partials_type;
  }
  get stochastic_rounding(): boolean {
    return this.v.stochastic_rounding;
  }
  get floating_point_exceptions(): boolean {
    return this.v.floating_point_exceptions;
  }

  toJSON(): PrecisionJSON {
    return { ...this.v };
  }
}

export interface TensorLocationsJSON {
  location_activation?: TensorLocationValues;
  location_weight?: TensorLocationValues;
  location_optimizer?: TensorLocationValues;
  location_accumulator?: TensorLocationValues;
  num_io_tiles?: number;
}

/** Where tensors are stored (`opts.TensorLocations`). */
export class TensorLocationOptions {
  private v: TensorLocationsJSON = {};

  private setLocation(option: string, key: keyof TensorLocationsJSON, location: unknown): this {
    if (!(location instanceof TensorLocationSettings)) {
      throw new OptionsError(`expected a TensorLocationSettings, got ${fmt(location)}`, option);
    }
    (this.v as Record<string, unknown>)[key] = location.toDict();
    return this;
  }

  setActivationLocation(location: TensorLocationSettings): this {
    return this.setLocation('TensorLocations.setActivationLocation', 'location_activation', location);
  }
  setWeightLocation(location: TensorLocationSettings): this {
    return this.setLocation('TensorLocations.setWeightLocation', 'location_weight', location);
  }
  setOptimizerLocation(location: TensorLocationSettings): this {
    return this.setLocation('TensorLocations.setOptimizerLocation', 'location_optimizer', location);
  }
  setAccumulatorLocation(location: TensorLocationSettings): this {
    return this.setLocation('TensorLocations.setAccumulatorLocation', 'location_accumulator', location);
  }

  /** Tiles set aside for IO (an even number from 32 to 192). */
  numIOTiles(numTiles: number): this {
    const option = 'TensorLocations.numIOTiles';
    if (typeof numTiles !== 'number' || !Number.isInteger(numTiles) || numTiles < 32 || numTiles > 192 || numTiles % 2 !== 0) {
      throw new OptionsError(`expected an even number between 32 and 192, got ${fmt(numTiles)}`, option);
    }
    this.v.num_io_tiles = numTiles;
    return this;
  }

  get location_activation(): Readonly<TensorLocationValues> | undefined {
    return this.v.location_activation && { ...this.v.location_activation };
  }
  get location_weight(): Readonly<TensorLocationValues> | undefined {
    return this.v.location_weight && { ...this.v.location_weight };
  }
  get location_optimizer(): Readonly<TensorLocationValues> | undefined {
    return this.v.location_optimizer && { ...this.v.location_optimizer };
  }
  get location_accumulator(): Readonly<TensorLocationValues> | undefined {
    return this.v.location_accumulator && { ...this.v.location_accumulator };
  }
  get num_io_tiles(): number | undefined {
    return this.v.num_io_tiles;
  }

  toJSON(): TensorLocationsJSON {
    const out: TensorLocationsJSON = {};
    for (const k of LOCATION_SLOTS) if (this.v[k] !== undefined) out[k] = { ...this.v[k] };
    if (this.v.num_io_tiles !== undefined) out.num_io_tiles = this.v.num_io_tiles;
    return out;
  }
}

const LOCATION_SLOTS = ['location_activation', 'location_weight', 'location_optimizer', 'location_accumulator'] as const;
const LOCATION_SETTERS: Record<(typeof LOCATION_SLOTS)[number], string> = {
  location_activation: 'setActivationLocation',
  location_weight: 'setWeightLocation',
  location_optimizer: 'setOptimizerLocation',
  location_accumulator: 'setAccumulatorLocation',
};

export interface DistributedJSON {
  distributed_process_id: number;
  num_distributed_processes: number;
  env_var_num_processes: string;
  env_var_process_id: string;
}

/** PopART's automaticLossScalingSettings (the `enabled` flag is Training.setAutomaticLossScaling). */
export interface AutomaticLossScalingSettingsJSON {
  bin_edge_location: number;
  threshold_upper_count_proportion: number;
  update_period: number;
}

/** PopART's defaults (binEdgeLocation 0.125, thresholdUpperCountProportion 1e-7, updatePeriod 1). */
export const DEFAULT_AUTOMATIC_LOSS_SCALING_SETTINGS: Readonly<AutomaticLossScalingSettingsJSON> = { bin_edge_location: 0.125, threshold_upper_count_proportion: 1e-7, update_period: 1 };

const LOSS_SCALING_KEYS: Record<string, keyof AutomaticLossScalingSettingsJSON> = {
  'automaticLossScalingSettings.binEdgeLocation': 'bin_edge_location',
  'automaticLossScalingSettings.thresholdUpperCountProportion': 'threshold_upper_count_proportion',
  'automaticLossScalingSettings.updatePeriod': 'update_period',
};

function checkLossScalingSetting(option: string, key: keyof AutomaticLossScalingSettingsJSON, v: unknown): number {
  if (key === 'update_period') return checkPositiveInt(option, v);
  if (typeof v !== 'number' || !(v >= 0 && v <= 1)) throw new OptionsError(`expected a number in [0, 1], got ${fmt(v)}`, option);
  return v;
}

/**
 * PopART session options that PopTorch passes through unchanged (`opts._Popart.set(key, value)`).
 * Only the keys tilegraph acts on are accepted, so a setting is never dropped silently.
 */
export class PopartOptions {
  constructor(
    private readonly setRecomputation: (type: RecomputationType) => void,
    private readonly setLossScaling: (key: keyof AutomaticLossScalingSettingsJSON | 'enabled', value: number | boolean) => void = () => {},
  ) {}

  /**
   * `set("autoRecomputation", n)`: n is PopART's RecomputationType integer (0 None, 1 Standard,
   * 2 NormOnly, 3 Pipeline, 4 RecomputeAll) or a RecomputationType member.
   */
  set(key: string, value: unknown): this {
    const option = '_Popart.set';
    // automaticLossScalingSettings.enabled is what Training.setAutomaticLossScaling sets in PopTorch
    if (key === 'automaticLossScalingSettings.enabled') {
      this.setLossScaling('enabled', checkBool(`${option}(${fmt(key)})`, value));
      return this;
    }
    const als = LOSS_SCALING_KEYS[key];
    if (als) {
      this.setLossScaling(als, checkLossScalingSetting(`${option}(${fmt(key)})`, als, value));
      return this;
    }
    if (key !== 'autoRecomputation') {
      const known = ['autoRecomputation', 'automaticLossScalingSettings.enabled', ...Object.keys(LOSS_SCALING_KEYS)];
      throw new OptionsError(`unknown PopART option ${fmt(key)}; the PopART options tilegraph acts on are: ${known.join(', ')}`, option);
    }
    if (typeof value === 'number') {
      const type = Number.isInteger(value) ? RECOMPUTATION_BY_INT[value] : undefined;
      if (type === undefined) {
        const accepted = RECOMPUTATION_BY_INT.map((t, i) => `${i} (${t})`).join(', ');
        throw new OptionsError(`autoRecomputation ${fmt(value)} is not a RecomputationType; expected ${accepted}`, option);
      }
      this.setRecomputation(type);
    } else {
      this.setRecomputation(checkEnum(`${option}("autoRecomputation")`, 'RecomputationType', RecomputationType, value));
    }
    return this;
  }
}

/**
 * Multi-process (multi-host) execution (`opts.Distributed`). As in PopTorch, the process id and
 * count come from OpenMPI's environment (OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE, which
 * mpirun sets) unless setEnvVarNames() or configureProcessId() say otherwise.
 */
export class DistributedOptions {
  private v: DistributedJSON = {
    distributed_process_id: 0,
    num_distributed_processes: 1,
    env_var_num_processes: 'OMPI_COMM_WORLD_SIZE',
    env_var_process_id: 'OMPI_COMM_WORLD_RANK',
  };

  constructor(env: NodeJS.ProcessEnv = process.env) {
    this.setEnvVarNames(this.v.env_var_num_processes, this.v.env_var_process_id, env);
  }

  /** Ignore any distributed settings: one process, id 0. */
  disable(): this {
    this.v.distributed_process_id = 0;
    this.v.num_distributed_processes = 1;
    return this;
  }

  /** Read the process id and count from these environment variables (missing: id 0 of 1). */
  setEnvVarNames(varNameForNumProcesses: string, varNameForProcessId: string, env: NodeJS.ProcessEnv = process.env): this {
    const option = 'Distributed.setEnvVarNames';
    checkNonEmptyString(option, varNameForNumProcesses, 'an environment variable name');
    checkNonEmptyString(option, varNameForProcessId, 'an environment variable name');
    const read = (name: string, dflt: number): number => {
      const s = env[name];
      if (s === undefined || s === '') return dflt;
      if (!/^\s*\d+\s*$/.test(s)) {
        throw new OptionsError(`environment variable ${name}=${JSON.stringify(s)} is not a non-negative integer`, option);
      }
      return Number(s);
    };
    const id = read(varNameForProcessId, 0);
    const n = read(varNameForNumProcesses, 1);
    this.configureProcessId(id, n);
    this.v.env_var_num_processes = varNameForNumProcesses;
    this.v.env_var_process_id = varNameForProcessId;
    return this;
  }

  /** This process's id and the number of processes the run is distributed over. */
  configureProcessId(processId: number, numProcesses: number): this {
    const option = 'Distributed.configureProcessId';
    const n = checkPositiveInt(option, numProcesses);
    const id = checkNonNegativeInt(option, processId);
    if (id >= n) {
      throw new OptionsError(
        `process id ${id} is out of range for ${n} process(es); expected 0 <= processId < numProcesses`,
        option,
      );
    }
    this.v.distributed_process_id = id;
    this.v.num_distributed_processes = n;
    return this;
  }

  /** Id of this process. */
  get processId(): number {
    return this.v.distributed_process_id;
  }
  /** Number of processes the run is distributed over. */
  get numProcesses(): number {
    return this.v.num_distributed_processes;
  }
  get env_var_num_processes(): string {
    return this.v.env_var_num_processes;
  }
  get env_var_process_id(): string {
    return this.v.env_var_process_id;
  }

  toJSON(): DistributedJSON {
    return { ...this.v };
  }

  /** Restore names without reading the environment (used by fromJSON). */
  restoreEnvVarNames(varNameForNumProcesses: string, varNameForProcessId: string): void {
    const option = 'Distributed.setEnvVarNames';
    this.v.env_var_num_processes = checkNonEmptyString(option, varNameForNumProcesses, 'an environment variable name');
    this.v.env_var_process_id = checkNonEmptyString(option, varNameForProcessId, 'an environment variable name');
  }
}

// ---------------------------------------------------------------------------------------------
// Options

export interface AnchorJSON {
  /** The name of the tensor in the graph. */
  path: string;
  /** null: the same output mode as the model outputs. */
  output_mode: OutputMode | null;
  output_return_period: number;
}

export interface OptionsJSON {
  device_iterations: number;
  replication_factor: number;
  input_group_size: number;
  input_group_type: CommGroupType;
  output_mode: OutputMode;
  output_return_period: number;
  anchored_tensors: Record<string, AnchorJSON>;
  source_location_excludes: string[];
  random_seed?: number;
  executable_cache_dir?: string;
  executable_timeout: number;
  synthetic_data: boolean;
  connection_type: ConnectionType;
  use_model: boolean;
  ipu_version?: number;
  ipu_id?: number;
  auto_round_num_ipus: boolean;
  available_memory_proportion: Record<string, number>;
  sync_pattern: SyncPattern;
  broadcast_buffers: boolean;
  model_name?: string;
  log_dir: string;
  max_repeat_logs: number;
  log_cycle_count: boolean;
  profile_dir?: string;
  show_compilation_progress_bar: boolean;
  stable_norm: boolean;
  module_namescope_enabled: boolean;
  relax_optimizer_attributes_checks: boolean;
  auto_recomputation: RecomputationType;
  /** Set by `_Popart.set("automaticLossScalingSettings.<name>", v)`; absent when none was set. */
  automatic_loss_scaling_settings?: AutomaticLossScalingSettingsJSON;
  execution_strategy: ExecutionStrategyJSON;
  Training: TrainingJSON;
  Precision: PrecisionJSON;
  TensorLocations: TensorLocationsJSON;
  Distributed: DistributedJSON;
}

type TopJSON = Omit<OptionsJSON, 'execution_strategy' | 'Training' | 'Precision' | 'TensorLocations' | 'Distributed'>;

/**
 * Frames whose file contains one of these are skipped when a source location is shown (the
 * counterpart of PopTorch's excludes of its own and torch's install directories).
 */
export const DEFAULT_SOURCE_LOCATION_EXCLUDES: readonly string[] = Object.freeze(['node_modules/@tilegraph/', 'node:internal']);

/** A problem found by `problemsFor` / `validateFor`. */
export interface OptionsProblem {
  severity: 'error' | 'warning';
  /** The setter concerned, e.g. 'Training.gradientAccumulation'. */
  option: string;
  message: string;
}

/** A hardware-only option set away from its default. */
export interface HardwareOnlyOption {
  /** The setter, e.g. 'connectionType' or 'Precision.enableStochasticRounding'. */
  option: string;
  value: unknown;
}

/** Setters whose effect needs a physical IPU (see `Options.hardwareOnlyOptions`). */
export const HARDWARE_ONLY_OPTIONS: readonly string[] = Object.freeze([
  // OnDemand only: Always and Never take effect (Never compiles without attaching)
  'connectionType',
  'syncPattern',
  'TensorLocations.numIOTiles',
  'Distributed.configureProcessId',
  'Distributed.setEnvVarNames',
]);

const SUB_OBJECTS = ['Training', 'Precision', 'TensorLocations', 'Distributed', '_Popart'] as const;

/** All options controlling how a model is compiled and executed. */
export class Options {
  private v: TopJSON = {
    device_iterations: 1,
    replication_factor: 1,
    input_group_size: 1,
    input_group_type: CommGroupType.Consecutive,
    output_mode: OutputMode.Default,
    output_return_period: 1,
    anchored_tensors: {},
    source_location_excludes: [...DEFAULT_SOURCE_LOCATION_EXCLUDES],
    synthetic_data: false,
    connection_type: ConnectionType.Always,
    use_model: false,
    auto_round_num_ipus: false,
    available_memory_proportion: {},
    sync_pattern: SyncPattern.Full,
    broadcast_buffers: true,
    log_dir: '.',
    max_repeat_logs: 4,
    log_cycle_count: false,
    show_compilation_progress_bar: true,
    executable_timeout: 600,
    stable_norm: false,
    module_namescope_enabled: true,
    relax_optimizer_attributes_checks: false,
    auto_recomputation: RecomputationType.None,
  };
  private strategy: ExecutionStrategy = new PipelinedExecution();
  private readonly training = new TrainingOptions();
  private readonly precision = new PrecisionOptions();
  private readonly tensorLocations = new TensorLocationOptions();
  private readonly distributed = new DistributedOptions();
  private readonly popart = new PopartOptions(
    (type) => {
      this.v.auto_recomputation = type;
    },
    (key, value) => {
      if (key === 'enabled') this.training.setAutomaticLossScaling(value as boolean);
      else this.v.automatic_loss_scaling_settings = { ...(this.v.automatic_loss_scaling_settings ?? DEFAULT_AUTOMATIC_LOSS_SCALING_SETTINGS), [key]: value };
    },
  );

  /** Options for training models. */
  get Training(): TrainingOptions {
    return this.training;
  }
  /** Options about numeric precision. */
  get Precision(): PrecisionOptions {
    return this.precision;
  }
  /** Where tensors are stored. */
  get TensorLocations(): TensorLocationOptions {
    return this.tensorLocations;
  }
  /** Multi-process execution. */
  get Distributed(): DistributedOptions {
    return this.distributed;
  }
  /** PopART session options PopTorch passes through (advanced; only the keys tilegraph acts on). */
  get _Popart(): PopartOptions {
    return this.popart;
  }

  // --- setters -------------------------------------------------------------------------------

  /** Batches the device processes per run, looping on the device (default 1). */
  deviceIterations(n: number): this {
    this.v.device_iterations = checkPositiveInt('deviceIterations', n);
    return this;
  }

  /** Number of data-parallel replicas of the model (default 1). */
  replicationFactor(n: number): this {
    this.v.replication_factor = checkPositiveInt('replicationFactor', n);
    return this;
  }

  /**
   * Split the input between groups of replicas: replicas of a group receive the same data.
   * The group size must divide the replication factor (checked by `problemsFor`, since the two
   * can be set in either order); CommGroupType.All is not valid here.
   */
  inputReplicaGrouping(groupSize: number, groupType: CommGroupType = CommGroupType.Consecutive): this {
    const option = 'inputReplicaGrouping';
    const size = checkPositiveInt(option, groupSize);
    const type = checkEnum(option, 'CommGroupType', CommGroupType, groupType);
    if (type === CommGroupType.All) {
      throw new OptionsError(
        'CommGroupType.All is not valid for input grouping; ' +
          'expected CommGroupType.Consecutive, CommGroupType.Orthogonal or CommGroupType.NoGrouping',
        option,
      );
    }
    this.v.input_group_size = size;
    this.v.input_group_type = type;
    return this;
  }

  /** Which results a run returns: All, Sum, Final, EveryN (with a return period) or Default. */
  outputMode(mode: OutputMode, period?: number | null): this {
    const option = 'outputMode';
    const m = checkEnum(option, 'OutputMode', OutputMode, mode);
    let p = 1;
    if (m === OutputMode.EveryN) {
      if (period === undefined || period === null) {
        throw new OptionsError('OutputMode.EveryN needs a return period (a positive integer), got none', option);
      }
      p = checkPositiveInt(option, period);
    } else if (period !== undefined && period !== null) {
      throw new OptionsError(
        `a return period applies only to OutputMode.EveryN, got OutputMode.${m} with period ${fmt(period)}`,
        option,
      );
    }
    this.v.output_mode = m;
    this.v.output_return_period = p;
    return this;
  }

  /**
   * Return the tensor `path` from each run under the name `name`. Without a mode it follows the
   * model outputs' mode; the period only applies to OutputMode.EveryN.
   */
  anchorTensor(name: string, path: string, mode: OutputMode | null = null, period: number | null = 1): this {
    const option = 'anchorTensor';
    checkNonEmptyString(option, name, 'a non-empty anchor name');
    checkNonEmptyString(option, path, 'a non-empty tensor name');
    let m: OutputMode | null = null;
    let p = 1;
    if (mode !== null && mode !== undefined) {
      m = checkEnum(option, 'OutputMode', OutputMode, mode);
      if (m === OutputMode.EveryN) {
        if (period === null || period === undefined) {
          throw new OptionsError('OutputMode.EveryN needs a return period (a positive integer), got none', option);
        }
        p = checkPositiveInt(option, period);
      }
    }
    this.v.anchored_tensors = { ...this.v.anchored_tensors, [name]: { path, output_mode: m, output_return_period: p } };
    return this;
  }

  /** Replace the list of source-location exclude patterns. */
  sourceLocationExcludes(excludes: string[]): this {
    const option = 'sourceLocationExcludes';
    if (!Array.isArray(excludes) || !excludes.every((e) => typeof e === 'string')) {
      throw new OptionsError(`expected a list of strings, got ${fmt(excludes)}`, option);
    }
    this.v.source_location_excludes = [...excludes];
    return this;
  }

  /** Add source-location exclude patterns. */
  appendToLocationExcludes(...excludes: string[]): this {
    for (const e of excludes) {
      if (typeof e !== 'string') throw new OptionsError(`expected strings, got ${fmt(e)}`, 'appendToLocationExcludes');
    }
    this.v.source_location_excludes = [...this.v.source_location_excludes, ...excludes];
    return this;
  }

  /** Seed of the device random number generator. */
  randomSeed(seed: number): this {
    this.v.random_seed = checkNonNegativeInt('randomSeed', seed);
    return this;
  }

  /** Keep compiled executables in this directory and reuse them; null disables caching. */
  enableExecutableCaching(path: string | null): this {
    if (path === null) delete this.v.executable_cache_dir;
    else this.v.executable_cache_dir = checkNonEmptyString('enableExecutableCaching', path, 'a directory path or null');
    return this;
  }

  /**
   * Longest wait, in seconds, for one answer of the compiled executable (a step, a weights
   * transfer) before it is stopped with a diagnostic (default 600).
   */
  executableTimeout(seconds: number): this {
    if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds <= 0) throw new OptionsError(`expected a positive number of seconds, got ${fmt(seconds)}`, 'executableTimeout');
    this.v.executable_timeout = seconds;
    return this;
  }

  /**
   * Inputs become zeros made on the device (PopART's SyntheticDataMode.Zeros): no input data is
   * copied from the host, and run() needs no inputs. For measuring the device alone.
   */
  enableSyntheticData(enabled: boolean): this {
    this.v.synthetic_data = checkBool('enableSyntheticData', enabled);
    return this;
  }

  /** When to attach to the IPU: Always (default), OnDemand (hardware only) or Never (compile only; running raises). */
  connectionType(type: ConnectionType): this {
    this.v.connection_type = checkEnum('connectionType', 'ConnectionType', ConnectionType, type);
    return this;
  }

  /** Use Poplar's IPU Model simulator instead of hardware (the host program creates an IPUModel device). */
  useIpuModel(useModel: boolean): this {
    this.v.use_model = checkBool('useIpuModel', useModel);
    return this;
  }

  /** Compile for an offline IPU target (1: Mk1, 2: Mk2) and never attach (connectionType Never). */
  useOfflineIpuTarget(ipuVersion = 2): this {
    if (ipuVersion !== 1 && ipuVersion !== 2) {
      throw new OptionsError(`expected IPU version 1 (Mk1) or 2 (Mk2), got ${fmt(ipuVersion)}`, 'useOfflineIpuTarget');
    }
    this.v.ipu_version = ipuVersion;
    this.v.connection_type = ConnectionType.Never;
    return this;
  }

  /** Use the IPU device with this id (as listed by `gc-info`; ids from 64 are multi-IPU devices). */
  useIpuId(ipuId: number): this {
    this.v.ipu_id = checkNonNegativeInt('useIpuId', ipuId);
    return this;
  }

  /** Round the number of IPUs requested up to a power of two instead of failing. */
  autoRoundNumIPUs(autoRound = true): this {
    this.v.auto_round_num_ipus = checkBool('autoRoundNumIPUs', autoRound);
    return this;
  }

  /**
   * Proportion of tile memory available as temporary memory for matmuls, convolutions and the
   * like, per IPU: `{IPU0: 0.6, IPU1: 0.3}`. Replaces any previous setting.
   */
  setAvailableMemoryProportion(proportions: Record<string, number>): this {
    const option = 'setAvailableMemoryProportion';
    if (!isPlainObject(proportions)) {
      throw new OptionsError(`expected an object such as {IPU0: 0.6}, got ${fmt(proportions)}`, option);
    }
    const out: Record<string, number> = {};
    for (const [key, value] of Object.entries(proportions)) {
      const m = /^IPU(\d+)$/.exec(key);
      if (m === null) {
        throw new OptionsError(`key ${JSON.stringify(key)} is not of the form IPU<n>; expected e.g. {IPU0: 0.6}`, option);
      }
      if (typeof value !== 'number' || !(value >= 0 && value <= 1)) {
        throw new OptionsError(`${key} = ${fmt(value)} is outside [0, 1]; expected a proportion between 0 and 1`, option);
      }
      out[`IPU${Number(m[1])}`] = value;
    }
    this.v.available_memory_proportion = out;
    return this;
  }

  /** How IPUs synchronise: Full (default), SinglePipeline or ReplicaAndLadder. Hardware only. */
  syncPattern(pattern: SyncPattern): this {
    this.v.sync_pattern = checkEnum('syncPattern', 'SyncPattern', SyncPattern, pattern);
    return this;
  }

  /**
   * With replication, buffers (batch-norm running statistics) take replica 0's values on every
   * replica after each training run (default true, as torch's DistributedDataParallel); false
   * keeps each replica's own.
   */
  broadcastBuffers(broadcast = true): this {
    this.v.broadcast_buffers = checkBool('broadcastBuffers', broadcast);
    return this;
  }

  /** Name of the model (default 'training' or 'inference'): its profile folder and log file are named after it. */
  modelName(name: string): this {
    this.v.model_name = checkNonEmptyString('modelName', name);
    return this;
  }

  /** Directory of the model's log file `<modelName>.log` (default '.', which writes none). */
  logDir(path: string): this {
    this.v.log_dir = checkNonEmptyString('logDir', path, 'a directory path');
    return this;
  }

  /**
   * For a message repeated many times (the same warning from many ops), show it at most
   * `number` times, then say once how many more there were (default 4, as in PopTorch).
   */
  maxRepeatLogs(number: number): this {
    this.v.max_repeat_logs = checkPositiveInt('maxRepeatLogs', number);
    return this;
  }

  /**
   * Count the estimated cycles of each run on the emulated engine: the executor's cycleCount()
   * needs it, as in PopTorch, and then reads the last run's (see docs/report.md, "Profiling").
   */
  logCycleCount(enabled: boolean): this {
    this.v.log_cycle_count = checkBool('logCycleCount', enabled);
    return this;
  }

  /**
   * Write a profile of the compile and of the runs into `<profileDir>/<modelName>/` (default
   * '.'): see docs/report.md. On the Poplar SDK, Poplar writes its own profile.pop there too.
   */
  enableProfiling(profileDir: string | null = null): this {
    this.v.profile_dir = profileDir === null ? '.' : checkNonEmptyString('enableProfiling', profileDir, 'a directory path');
    return this;
  }

  /** Show a progress bar while compiling (default true). */
  showCompilationProgressBar(show = true): this {
    this.v.show_compilation_progress_bar = checkBool('showCompilationProgressBar', show);
    return this;
  }

  /** How blocks are split across IPUs, stages and phases (default: PipelinedExecution(AutoStage.SameAsIpu)). */
  setExecutionStrategy(strategy: ExecutionStrategy): this {
    if (!(strategy instanceof ExecutionStrategy)) {
      throw new OptionsError(
        `expected a PipelinedExecution, ShardedExecution, SerialPhasedExecution or ParallelPhasedExecution, got ${fmt(strategy)}`,
        'setExecutionStrategy',
      );
    }
    this.strategy = strategy;
    return this;
  }

  /**
   * PopART's stable norm (the variance of x − mean). tilegraph's norms always compute it so,
   * whatever this says (docs/training.md).
   */
  enableStableNorm(enabled: boolean): this {
    this.v.stable_norm = checkBool('enableStableNorm', enabled);
    return this;
  }

  /** Ops keep no name scope of the module that made them (in IR dumps and reports). */
  disableModuleNamescope(): this {
    this.v.module_namescope_enabled = false;
    return this;
  }

  /** An attribute setOptimizer does not know is a warning (and left out) instead of an error. */
  relaxOptimizerAttributesChecks(relax = true): this {
    this.v.relax_optimizer_attributes_checks = checkBool('relaxOptimizerAttributesChecks', relax);
    return this;
  }

  // --- stored values -------------------------------------------------------------------------

  get device_iterations(): number {
    return this.v.device_iterations;
  }
  get replication_factor(): number {
    return this.v.replication_factor;
  }
  get input_group_size(): number {
    return this.v.input_group_size;
  }
  get input_group_type(): CommGroupType {
    return this.v.input_group_type;
  }
  /** As set; see `outputModeFor` for what Default means. */
  get output_mode(): OutputMode {
    return this.v.output_mode;
  }
  get output_return_period(): number {
    return this.v.output_return_period;
  }
  get anchored_tensors(): Readonly<Record<string, Readonly<AnchorJSON>>> {
    return copyJSON(this.v.anchored_tensors);
  }
  get source_location_excludes(): readonly string[] {
    return [...this.v.source_location_excludes];
  }
  get random_seed(): number | undefined {
    return this.v.random_seed;
  }
  get executable_cache_dir(): string | undefined {
    return this.v.executable_cache_dir;
  }
  get synthetic_data(): boolean {
    return this.v.synthetic_data;
  }
  get connection_type(): ConnectionType {
    return this.v.connection_type;
  }
  get use_model(): boolean {
    return this.v.use_model;
  }
  get ipu_version(): number | undefined {
    return this.v.ipu_version;
  }
  get ipu_id(): number | undefined {
    return this.v.ipu_id;
  }
  get auto_round_num_ipus(): boolean {
    return this.v.auto_round_num_ipus;
  }
  /** Keyed 'IPU<n>'. */
  get available_memory_proportion(): Readonly<Record<string, number>> {
    return { ...this.v.available_memory_proportion };
  }
  get sync_pattern(): SyncPattern {
    return this.v.sync_pattern;
  }
  get broadcast_buffers(): boolean {
    return this.v.broadcast_buffers;
  }
  /** As set; see `modelNameFor` for the default. */
  get model_name(): string | undefined {
    return this.v.model_name;
  }
  get log_dir(): string {
    return this.v.log_dir;
  }
  get max_repeat_logs(): number {
    return this.v.max_repeat_logs;
  }
  get log_cycle_count(): boolean {
    return this.v.log_cycle_count;
  }
  /** Set by enableProfiling; undefined when profiling is off. */
  get profile_dir(): string | undefined {
    return this.v.profile_dir;
  }
  get executable_timeout(): number {
    return this.v.executable_timeout;
  }
  get show_compilation_progress_bar(): boolean {
    return this.v.show_compilation_progress_bar;
  }
  get stable_norm(): boolean {
    return this.v.stable_norm;
  }
  get module_namescope_enabled(): boolean {
    return this.v.module_namescope_enabled;
  }
  get relax_optimizer_attributes_checks(): boolean {
    return this.v.relax_optimizer_attributes_checks;
  }
  /** Set by `_Popart.set("autoRecomputation", n)`. */
  get auto_recomputation(): RecomputationType {
    return this.v.auto_recomputation;
  }
  /** PopART's automaticLossScalingSettings (`_Popart.set("automaticLossScalingSettings.<name>", v)`), defaults filled in. */
  get automatic_loss_scaling_settings(): AutomaticLossScalingSettingsJSON {
    return { ...(this.v.automatic_loss_scaling_settings ?? DEFAULT_AUTOMATIC_LOSS_SCALING_SETTINGS) };
  }
  get execution_strategy(): ExecutionStrategy {
    return this.strategy;
  }

  /** The available memory proportion set for one IPU, if any. */
  availableMemoryProportionFor(ipu: number): number | undefined {
    return this.v.available_memory_proportion[`IPU${ipu}`];
  }

  /** True while outputMode is OutputMode.Default. */
  defaultOutputMode(): boolean {
    return this.v.output_mode === OutputMode.Default;
  }

  /** The output mode a model of this kind uses: Default means All for inference, Final for training. */
  outputModeFor(kind: ModelKind): OutputMode {
    if (this.v.output_mode !== OutputMode.Default) return this.v.output_mode;
    return kind === 'training' ? OutputMode.Final : OutputMode.All;
  }

  /** The model name, defaulting to the kind of model. */
  modelNameFor(kind: ModelKind): string {
    return this.v.model_name ?? kind;
  }

  // --- checks --------------------------------------------------------------------------------

  /**
   * Problems that need more than one option, or the kind of model, to see. Without a kind, only
   * the kind-independent checks run. Never throws.
   */
  problemsFor(kind?: ModelKind): OptionsProblem[] {
    const out: OptionsProblem[] = [];
    const err = (option: string, message: string): void => {
      out.push({ severity: 'error', option, message });
    };
    const v = this.v;
    if (v.replication_factor % v.input_group_size !== 0) {
      err(
        'inputReplicaGrouping',
        `the replication factor (${v.replication_factor}) is not divisible by the input replica group size ` +
          `(${v.input_group_size}); the group size must divide replicationFactor`,
      );
    }
    if (v.ipu_version !== undefined && v.use_model) {
      err('useOfflineIpuTarget', 'the offline IPU target cannot be used with the IPU Model (useIpuModel(true)); choose one');
    }
    if (kind === undefined) return out;

    const ga = this.training.gradient_accumulation;
    const pipelined = this.strategy instanceof PipelinedExecution && !(this.strategy instanceof ShardedExecution);
    if (kind === 'inference' && ga !== 1) {
      let msg = `gradient accumulation is ${ga}; it must be 1 (the default) for an inference model`;
      if (pipelined) msg += '. Use deviceIterations to process enough batches per run for pipelined execution instead';
      err('Training.gradientAccumulation', msg);
    }
    if (pipelined) {
      const n = (this.strategy as PipelinedExecution).stages.length;
      if (n > 1) {
        // PopART's pipeline needs one batch per pipeline stage in flight: a training pipeline of
        // n forward stages has 2n-1 stages (the last forward and first backward stage are shared).
        // Interleaved keeps n micro-batches in flight; Sequential one.
        const sched = (this.strategy as PipelinedExecution).pipeline_schedule;
        const grouped = sched === PipelineSchedule.Grouped;
        const stages = sched === PipelineSchedule.Sequential ? 1 : kind === 'training' && grouped ? 2 * n - 1 : n;
        if (kind === 'training' && ga > 1) {
          if (ga < stages) {
            err(
              'Training.gradientAccumulation',
              `pipelining ${n} stages for training${grouped ? '' : ` with PipelineSchedule.${sched}`} needs a gradient accumulation of at least ${stages} ` +
                `(${grouped ? `2 × ${n} − 1` : 'one per stage'}), got ${ga}`,
            );
          }
        } else if (kind === 'inference' && v.device_iterations > 1 && v.device_iterations < stages) {
          // one micro-batch per run runs the stages one after another (the compiler says so)
          err(
            'deviceIterations',
            `pipelining ${n} stages for ${kind} needs at least ${stages} device iterations, got ${v.device_iterations}`,
          );
        }
      }
    }
    if (kind === 'inference' && v.auto_recomputation !== RecomputationType.None) {
      out.push({
        severity: 'warning',
        option: '_Popart.set("autoRecomputation")',
        message: 'recomputation applies to the backward pass; it has no effect on an inference model',
      });
    }
    if (kind === 'inference') {
      const t = this.training.toJSON();
      const d = new TrainingOptions().toJSON();
      for (const key of Object.keys(t) as (keyof TrainingJSON)[]) {
        if (key !== 'gradient_accumulation' && t[key] !== d[key]) {
          out.push({
            severity: 'warning',
            option: `Training.${TRAINING_SETTERS[key]}`,
            message: 'training options have no effect on an inference model',
          });
        }
      }
    }
    return out;
  }

  /**
   * Check the options for a model of this kind: throws an OptionsError listing every error
   * (as PopTorch refuses e.g. gradient accumulation on an inference model); returns the warnings.
   */
  validateFor(kind: ModelKind): OptionsProblem[] {
    const problems = this.problemsFor(kind);
    const errors = problems.filter((p) => p.severity === 'error');
    if (errors.length > 0) {
      throw new OptionsError(errors.map((e) => `${e.option}: ${e.message}`).join('\n'));
    }
    return problems;
  }

  /**
   * Hardware-only options set away from their defaults. The emulated target (the default on a
   * machine without an IPU) records these options but does not act on them: they affect attaching
   * on demand, synchronisation, IO tiles and multi-host runs, none of which the emulation models.
   * Callers list them so such settings are reported, never silently dropped.
   */
  hardwareOnlyOptions(): HardwareOnlyOption[] {
    const d = new Options();
    const out: HardwareOnlyOption[] = [];
    const add = (option: string, value: unknown, dflt: unknown): void => {
      if (JSON.stringify(value) !== JSON.stringify(dflt)) out.push({ option, value });
    };
    // the device options (useIpuModel, useOfflineIpuTarget, useIpuId, autoRoundNumIPUs) and
    // connectionType(Never) take effect in the generated host program, on the emulation too
    if (this.v.connection_type === ConnectionType.OnDemand) add('connectionType', this.v.connection_type, d.v.connection_type);
    add('syncPattern', this.v.sync_pattern, d.v.sync_pattern);
    add('TensorLocations.numIOTiles', this.tensorLocations.num_io_tiles, undefined);
    const dist = this.distributed.toJSON();
    const dd = d.distributed.toJSON();
    add(
      'Distributed.configureProcessId',
      [dist.distributed_process_id, dist.num_distributed_processes],
      [dd.distributed_process_id, dd.num_distributed_processes],
    );
    add(
      'Distributed.setEnvVarNames',
      [dist.env_var_num_processes, dist.env_var_process_id],
      [dd.env_var_num_processes, dd.env_var_process_id],
    );
    return out;
  }

  // --- serialisation -------------------------------------------------------------------------

  /** Every stored value, under the snake_case names of the getters. */
  toJSON(): OptionsJSON {
    const top = copyJSON(this.v);
    return {
      ...top,
      execution_strategy: this.strategy.toJSON(),
      Training: this.training.toJSON(),
      Precision: this.precision.toJSON(),
      TensorLocations: this.tensorLocations.toJSON(),
      Distributed: this.distributed.toJSON(),
    };
  }

  /**
   * Options from a `toJSON()` object (or any part of one: missing keys keep their defaults).
   * Values go through the same checks as the setters.
   */
  static fromJSON(obj: unknown): Options {
    const o = new Options();
    o.applyJSON(obj);
    return o;
  }

  private applyJSON(obj: unknown): void {
    if (!isPlainObject(obj)) throw new OptionsError(`expected an object, got ${fmt(obj)}`, 'options JSON');
    checkKeys(obj, TOP_KEYS, 'options JSON');
    // Setter errors are re-labelled with the JSON key they came from.
    const at = <T>(key: string, f: () => T): T => {
      try {
        return f();
      } catch (e) {
        if (e instanceof OptionsError) throw new OptionsError(e.message, `options JSON, key ${key}`);
        throw e;
      }
    };
    const apply = (prefix: string, src: Record<string, unknown>, table: Record<string, (x: any) => unknown>): void => {
      for (const [key, set] of Object.entries(table)) {
        if (src[key] !== undefined) at(prefix + key, () => set(src[key]));
      }
    };
    const val = obj;
    const cur = this.v;

    apply('', val, {
      device_iterations: (x) => this.deviceIterations(x),
      replication_factor: (x) => this.replicationFactor(x),
      source_location_excludes: (x) => this.sourceLocationExcludes(x),
      random_seed: (x) => this.randomSeed(x),
      executable_cache_dir: (x) => this.enableExecutableCaching(x),
      executable_timeout: (x) => this.executableTimeout(x),
      synthetic_data: (x) => this.enableSyntheticData(x),
      ipu_version: (x) => {
        // connection_type is a key of its own: keep it rather than useOfflineIpuTarget's Never.
        const ct = cur.connection_type;
        this.useOfflineIpuTarget(x);
        this.v.connection_type = ct;
      },
      connection_type: (x) => this.connectionType(x),
      use_model: (x) => this.useIpuModel(x),
      ipu_id: (x) => this.useIpuId(x),
      auto_round_num_ipus: (x) => this.autoRoundNumIPUs(x),
      available_memory_proportion: (x) => this.setAvailableMemoryProportion(x),
      sync_pattern: (x) => this.syncPattern(x),
      broadcast_buffers: (x) => this.broadcastBuffers(x),
      model_name: (x) => this.modelName(x),
      log_dir: (x) => this.logDir(x),
      max_repeat_logs: (x) => this.maxRepeatLogs(x),
      log_cycle_count: (x) => this.logCycleCount(x),
      profile_dir: (x) => this.enableProfiling(x),
      show_compilation_progress_bar: (x) => this.showCompilationProgressBar(x),
      stable_norm: (x) => this.enableStableNorm(x),
      module_namescope_enabled: (x) => {
        this.v.module_namescope_enabled = checkBool('module_namescope_enabled', x);
      },
      relax_optimizer_attributes_checks: (x) => this.relaxOptimizerAttributesChecks(x),
      auto_recomputation: (x) => this.popart.set('autoRecomputation', x),
      automatic_loss_scaling_settings: (x) => {
        if (!isPlainObject(x)) throw new OptionsError(`expected an object, got ${fmt(x)}`);
        checkKeys(x, Object.values(LOSS_SCALING_KEYS), 'automatic_loss_scaling_settings');
        for (const [k, name] of Object.entries(LOSS_SCALING_KEYS)) if (x[name] !== undefined) this.popart.set(k, x[name]);
      },
      execution_strategy: (x) => this.setExecutionStrategy(executionStrategyFromJSON(x)),
    });
    if (val['input_group_size'] !== undefined || val['input_group_type'] !== undefined) {
      at('input_group_size', () =>
        this.inputReplicaGrouping(
          (val['input_group_size'] ?? cur.input_group_size) as number,
          (val['input_group_type'] ?? cur.input_group_type) as CommGroupType,
        ),
      );
    }
    if (val['output_mode'] !== undefined || val['output_return_period'] !== undefined) {
      at('output_mode', () => {
        const mode = (val['output_mode'] ?? cur.output_mode) as OutputMode;
        const period = val['output_return_period'];
        if (mode === OutputMode.EveryN) this.outputMode(mode, period as number);
        else if (period !== undefined && period !== 1) {
          throw new OptionsError(`output_return_period ${fmt(period)} applies only to OutputMode.EveryN`);
        } else this.outputMode(mode);
      });
    }
    if (val['anchored_tensors'] !== undefined) {
      at('anchored_tensors', () => {
        const anchors = val['anchored_tensors'];
        if (!isPlainObject(anchors)) throw new OptionsError(`expected an object of anchors, got ${fmt(anchors)}`);
        for (const [name, a] of Object.entries(anchors)) {
          const where = `anchor ${JSON.stringify(name)}`;
          if (!isPlainObject(a)) throw new OptionsError(`${where}: expected {path, output_mode, output_return_period}`);
          checkKeys(a, ['path', 'output_mode', 'output_return_period'], where);
          const mode = (a['output_mode'] ?? null) as OutputMode | null;
          this.anchorTensor(name, a['path'] as string, mode, (a['output_return_period'] ?? 1) as number);
        }
      });
    }

    const group = (name: string, keys: readonly string[]): Record<string, unknown> | undefined => {
      const s = val[name];
      if (s === undefined) return undefined;
      return at(name, () => {
        if (!isPlainObject(s)) throw new OptionsError(`expected an object, got ${fmt(s)}`);
        checkKeys(s, keys, name);
        return s;
      });
    };
    const t = group('Training', Object.keys(TRAINING_SETTERS));
    const tr = this.training;
    if (t) {
      apply('Training.', t, {
        gradient_accumulation: (x) => tr.gradientAccumulation(x),
        accumulation_and_replication_reduction_type: (x) => tr.accumulationAndReplicationReductionType(x),
        mean_accumulation_and_replication_reduction_strategy: (x) => tr.setMeanAccumulationAndReplicationReductionStrategy(x),
        automatic_loss_scaling: (x) => tr.setAutomaticLossScaling(x),
        convolution_dithering: (x) => tr.setConvolutionDithering(x),
      });
    }
    const p = group('Precision', Object.keys(PRECISION_SETTERS));
    const pr = this.precision;
    if (p) {
      apply('Precision.', p, {
        half_float_casting: (x) => pr.halfFloatCasting(x),
        running_statistics_always_float: (x) => pr.runningStatisticsAlwaysFloat(x),
        partials_type: (x) => pr.setPartialsType(x),
        stochastic_rounding: (x) => pr.enableStochasticRounding(x),
        floating_point_exceptions: (x) => pr.enableFloatingPointExceptions(x),
      });
    }
    const l = group('TensorLocations', [...LOCATION_SLOTS, 'num_io_tiles']);
    const tl = this.tensorLocations;
    if (l) {
      apply('TensorLocations.', l, {
        location_activation: (x) => tl.setActivationLocation(TensorLocationSettings.fromDict(x, 'location_activation')),
        location_weight: (x) => tl.setWeightLocation(TensorLocationSettings.fromDict(x, 'location_weight')),
        location_optimizer: (x) => tl.setOptimizerLocation(TensorLocationSettings.fromDict(x, 'location_optimizer')),
        location_accumulator: (x) => tl.setAccumulatorLocation(TensorLocationSettings.fromDict(x, 'location_accumulator')),
        num_io_tiles: (x) => tl.numIOTiles(x),
      });
    }
    const d = group('Distributed', Object.keys(this.distributed.toJSON()));
    const di = this.distributed;
    if (d) {
      if (d['distributed_process_id'] !== undefined || d['num_distributed_processes'] !== undefined) {
        at('Distributed.distributed_process_id', () =>
          di.configureProcessId(
            (d['distributed_process_id'] ?? di.processId) as number,
            (d['num_distributed_processes'] ?? di.numProcesses) as number,
          ),
        );
      }
      if (d['env_var_num_processes'] !== undefined || d['env_var_process_id'] !== undefined) {
        at('Distributed.env_var_num_processes', () =>
          di.restoreEnvVarNames(
            (d['env_var_num_processes'] ?? di.env_var_num_processes) as string,
            (d['env_var_process_id'] ?? di.env_var_process_id) as string,
          ),
        );
      }
    }
  }

  /** A deep copy. */
  clone(): Options {
    return Options.fromJSON(this.toJSON());
  }

  /**
   * The options that differ from the defaults, one setter call per line in the options-file
   * syntax (so the text can be loaded back with `loadFromString`). Empty when all are defaults.
   */
  describe(): string {
    return this.setterLines().join('\n');
  }

  toString(): string {
    const lines = this.setterLines();
    return lines.length === 0 ? 'Options(defaults)' : `Options(${lines.join(', ')})`;
  }

  private setterLines(): string[] {
    const d = new Options().toJSON();
    const j = this.toJSON();
    const out: string[] = [];
    const differs = (a: unknown, b: unknown): boolean => JSON.stringify(a) !== JSON.stringify(b);
    const lit = (x: unknown): string => fileLiteral(x);

    if (differs(j.device_iterations, d.device_iterations)) out.push(`deviceIterations(${j.device_iterations})`);
    if (differs(j.replication_factor, d.replication_factor)) out.push(`replicationFactor(${j.replication_factor})`);
    if (j.input_group_size !== d.input_group_size || j.input_group_type !== d.input_group_type) {
      out.push(`inputReplicaGrouping(${j.input_group_size}, CommGroupType.${j.input_group_type})`);
    }
    if (j.output_mode !== d.output_mode || j.output_return_period !== d.output_return_period) {
      out.push(
        j.output_mode === OutputMode.EveryN
          ? `outputMode(OutputMode.EveryN, ${j.output_return_period})`
          : `outputMode(OutputMode.${j.output_mode})`,
      );
    }
    for (const [name, a] of Object.entries(j.anchored_tensors)) {
      let s = `anchorTensor(${lit(name)}, ${lit(a.path)}`;
      if (a.output_mode !== null) {
        s += `, OutputMode.${a.output_mode}`;
        if (a.output_mode === OutputMode.EveryN) s += `, ${a.output_return_period}`;
      }
      out.push(`${s})`);
    }
    if (differs(j.source_location_excludes, d.source_location_excludes)) {
      out.push(`sourceLocationExcludes(${lit(j.source_location_excludes)})`);
    }
    if (j.random_seed !== undefined) out.push(`randomSeed(${j.random_seed})`);
    if (j.executable_cache_dir !== undefined) out.push(`enableExecutableCaching(${lit(j.executable_cache_dir)})`);
    if (j.executable_timeout !== d.executable_timeout) out.push(`executableTimeout(${j.executable_timeout})`);
    if (j.synthetic_data) out.push('enableSyntheticData(True)');
    // useOfflineIpuTarget also sets the connection type, so the connection type follows it.
    if (j.ipu_version !== undefined) out.push(`useOfflineIpuTarget(${j.ipu_version})`);
    if (j.connection_type !== d.connection_type || j.ipu_version !== undefined) {
      out.push(`connectionType(ConnectionType.${j.connection_type})`);
    }
    if (j.use_model) out.push('useIpuModel(True)');
    if (j.ipu_id !== undefined) out.push(`useIpuId(${j.ipu_id})`);
    if (j.auto_round_num_ipus) out.push('autoRoundNumIPUs(True)');
    if (differs(j.available_memory_proportion, d.available_memory_proportion)) {
      out.push(`setAvailableMemoryProportion(${lit(j.available_memory_proportion)})`);
    }
    if (j.sync_pattern !== d.sync_pattern) out.push(`syncPattern(SyncPattern.${j.sync_pattern})`);
    if (!j.broadcast_buffers) out.push('broadcastBuffers(False)');
    if (j.model_name !== undefined) out.push(`modelName(${lit(j.model_name)})`);
    if (j.log_dir !== d.log_dir) out.push(`logDir(${lit(j.log_dir)})`);
    if (j.max_repeat_logs !== d.max_repeat_logs) out.push(`maxRepeatLogs(${j.max_repeat_logs})`);
    if (j.log_cycle_count) out.push('logCycleCount(True)');
    if (j.profile_dir !== undefined) out.push(`enableProfiling(${lit(j.profile_dir)})`);
    if (!j.show_compilation_progress_bar) out.push('showCompilationProgressBar(False)');
    if (j.stable_norm) out.push('enableStableNorm(True)');
    if (!j.module_namescope_enabled) out.push('disableModuleNamescope()');
    if (j.relax_optimizer_attributes_checks) out.push('relaxOptimizerAttributesChecks(True)');
    if (j.auto_recomputation !== d.auto_recomputation) out.push(`_Popart.set("autoRecomputation", RecomputationType.${j.auto_recomputation})`);
    for (const [k, name] of Object.entries(LOSS_SCALING_KEYS)) {
      const v = j.automatic_loss_scaling_settings?.[name];
      if (v !== undefined && v !== DEFAULT_AUTOMATIC_LOSS_SCALING_SETTINGS[name]) out.push(`_Popart.set(${lit(k)}, ${lit(v)})`);
    }
    if (differs(j.execution_strategy, d.execution_strategy)) out.push(`setExecutionStrategy(${this.strategy.describe()})`);

    const t = j.Training;
    const dt = d.Training;
    if (t.gradient_accumulation !== dt.gradient_accumulation) {
      out.push(`Training.gradientAccumulation(${t.gradient_accumulation})`);
    }
    const rt = t.accumulation_and_replication_reduction_type;
    if (rt !== dt.accumulation_and_replication_reduction_type) {
      out.push(`Training.accumulationAndReplicationReductionType(ReductionType.${rt})`);
    }
    const ms = t.mean_accumulation_and_replication_reduction_strategy;
    if (ms !== dt.mean_accumulation_and_replication_reduction_strategy) {
      out.push(`Training.setMeanAccumulationAndReplicationReductionStrategy(MeanReductionStrategy.${ms})`);
    }
    if (t.automatic_loss_scaling) out.push('Training.setAutomaticLossScaling(True)');
    if (t.convolution_dithering) out.push('Training.setConvolutionDithering(True)');

    const p = j.Precision;
    const dp = d.Precision;
    if (p.half_float_casting !== dp.half_float_casting) {
      out.push(`Precision.halfFloatCasting(HalfFloatCastingBehavior.${p.half_float_casting})`);
    }
    if (p.running_statistics_always_float !== dp.running_statistics_always_float) {
      out.push(`Precision.runningStatisticsAlwaysFloat(${pyBool(p.running_statistics_always_float)})`);
    }
    if (p.partials_type !== dp.partials_type) out.push(`Precision.setPartialsType(${lit(p.partials_type)})`);
    if (p.stochastic_rounding) out.push('Precision.enableStochasticRounding(True)');
    if (p.floating_point_exceptions) out.push('Precision.enableFloatingPointExceptions(True)');

    const l = j.TensorLocations;
    for (const slot of LOCATION_SLOTS) {
      const loc = l[slot];
      if (loc !== undefined) {
        out.push(`TensorLocations.${LOCATION_SETTERS[slot]}(${TensorLocationSettings.fromDict(loc).describe()})`);
      }
    }
    if (l.num_io_tiles !== undefined) out.push(`TensorLocations.numIOTiles(${l.num_io_tiles})`);

    const di = j.Distributed;
    const dd = d.Distributed;
    // setEnvVarNames reads the environment, so an explicit configureProcessId follows it.
    if (di.env_var_num_processes !== dd.env_var_num_processes || di.env_var_process_id !== dd.env_var_process_id) {
      out.push(`Distributed.setEnvVarNames(${lit(di.env_var_num_processes)}, ${lit(di.env_var_process_id)})`);
      out.push(`Distributed.configureProcessId(${di.distributed_process_id}, ${di.num_distributed_processes})`);
    } else if (
      di.distributed_process_id !== dd.distributed_process_id ||
      di.num_distributed_processes !== dd.num_distributed_processes
    ) {
      out.push(`Distributed.configureProcessId(${di.distributed_process_id}, ${di.num_distributed_processes})`);
    }
    return out;
  }

  // --- options files -------------------------------------------------------------------------

  /**
   * Apply an options file: one setter call per line, written as in a script without the
   * `options.` prefix (`deviceIterations(4)`, `Training.gradientAccumulation(2)`), with blank
   * lines and '#' comments. Every bad line is reported as `file:line: message`; the options are
   * changed only when the whole file is good.
   */
  loadFromFile(path: string): this {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (e) {
      throw new OptionsError(`${path}: cannot read the options file: ${(e as Error).message}`);
    }
    return this.loadFromString(text, path);
  }

  /** `loadFromFile` on text already in memory; `fileName` is used in messages. */
  loadFromString(text: string, fileName = '<options>'): this {
    const lines = text.split('\n').map((raw) => (raw.endsWith('\r') ? raw.slice(0, -1) : raw));
    // A dry run on a copy finds every bad line; only a good file is then applied here, which
    // keeps the identity of opts.Training and the other groups.
    const trial = this.clone();
    const errors: string[] = [];
    lines.forEach((line, i) => {
      try {
        runOptionsLine(trial, line);
      } catch (e) {
        if (!(e instanceof OptionsError)) throw e;
        errors.push(`${fileName}:${i + 1}${e.col !== undefined ? `:${e.col}` : ''}: ${e.message}`);
      }
    });
    if (errors.length > 0) throw new OptionsError(errors.join('\n'));
    for (const line of lines) runOptionsLine(this, line);
    return this;
  }

  /** Options from a `.json` file (toJSON form) or an options file of setter calls. */
  static fromFile(path: string): Options {
    if (!path.toLowerCase().endsWith('.json')) return new Options().loadFromFile(path);
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (e) {
      throw new OptionsError(`${path}: cannot read the options file: ${(e as Error).message}`);
    }
    let obj: unknown;
    try {
      obj = JSON.parse(text);
    } catch (e) {
      const m = /position (\d+)/.exec((e as Error).message);
      const where = m ? `:${text.slice(0, Number(m[1])).split('\n').length}` : '';
      throw new OptionsError(`${path}${where}: invalid JSON: ${(e as Error).message}`);
    }
    try {
      return Options.fromJSON(obj);
    } catch (e) {
      if (e instanceof OptionsError) throw new OptionsError(`${path}: ${e.message}`);
      throw e;
    }
  }

}

/** The keys of OptionsJSON: those of a default toJSON() plus the optional ones. */
const TOP_KEYS: readonly string[] = [
  ...Object.keys(new Options().toJSON()),
  ...['random_seed', 'executable_cache_dir', 'ipu_version', 'ipu_id', 'model_name', 'profile_dir', 'automatic_loss_scaling_settings'],
];

const TRAINING_SETTERS: Record<keyof TrainingJSON, string> = {
  gradient_accumulation: 'gradientAccumulation',
  accumulation_and_replication_reduction_type: 'accumulationAndReplicationReductionType',
  mean_accumulation_and_replication_reduction_strategy: 'setMeanAccumulationAndReplicationReductionStrategy',
  automatic_loss_scaling: 'setAutomaticLossScaling',
  convolution_dithering: 'setConvolutionDithering',
};

const PRECISION_SETTERS: Record<keyof PrecisionJSON, string> = {
  half_float_casting: 'halfFloatCasting',
  running_statistics_always_float: 'runningStatisticsAlwaysFloat',
  partials_type: 'setPartialsType',
  stochastic_rounding: 'enableStochasticRounding',
  floating_point_exceptions: 'enableFloatingPointExceptions',
};

/** A value written in the options-file syntax. */
function fileLiteral(x: unknown): string {
  if (x === null || x === undefined) return 'None';
  if (typeof x === 'boolean') return pyBool(x);
  if (typeof x === 'number') return String(x);
  if (typeof x === 'string') return JSON.stringify(x);
  if (Array.isArray(x)) return `[${x.map(fileLiteral).join(', ')}]`;
  if (isPlainObject(x)) return `{${Object.entries(x).map(([k, v]) => `${JSON.stringify(k)}: ${fileLiteral(v)}`).join(', ')}}`;
  throw new Error(`no options-file literal for ${fmt(x)}`);
}

// ---------------------------------------------------------------------------------------------
// The options-file parser: literals, enum members, the option classes and setter calls; no eval.

type Tok =
  | { k: 'id'; s: string; col: number }
  | { k: 'num'; n: number; col: number }
  | { k: 'str'; s: string; col: number }
  | { k: 'p'; s: string; col: number }
  | { k: 'end'; col: number };

function tokenize(line: string): Tok[] {
  const toks: Tok[] = [];
  let i = 0;
  while (i < line.length) {
    const c = line[i]!;
    const col = i + 1;
    if (c === ' ' || c === '\t') {
      i++;
    } else if (c === '#') {
      break;
    } else if (/[A-Za-z_]/.test(c)) {
      let j = i + 1;
      while (j < line.length && /[A-Za-z0-9_]/.test(line[j]!)) j++;
      toks.push({ k: 'id', s: line.slice(i, j), col });
      i = j;
    } else if (/[0-9]/.test(c) || ((c === '-' || c === '+' || c === '.') && /[0-9.]/.test(line[i + 1] ?? ''))) {
      const m = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?/.exec(line.slice(i));
      if (m === null) throw new OptionsError(`bad number at column ${col}`);
      toks.push({ k: 'num', n: Number(m[0]), col });
      i += m[0].length;
    } else if (c === '"' || c === "'") {
      let j = i + 1;
      let s = '';
      for (;;) {
        if (j >= line.length) throw new OptionsError(`unterminated string starting at column ${col}`);
        const d = line[j]!;
        if (d === c) break;
        if (d === '\\') {
          const e = line[j + 1];
          const simple: Record<string, string> = {
            ...{ n: '\n', t: '\t', r: '\r', b: '\b', f: '\f', '0': '\0' },
            ...{ '\\': '\\', '"': '"', "'": "'" },
          };
          if (e !== undefined && e in simple) {
            s += simple[e];
            j += 2;
          } else if (e === 'u' && /^[0-9a-fA-F]{4}$/.test(line.slice(j + 2, j + 6))) {
            s += String.fromCharCode(parseInt(line.slice(j + 2, j + 6), 16));
            j += 6;
          } else if (e === 'x' && /^[0-9a-fA-F]{2}$/.test(line.slice(j + 2, j + 4))) {
            s += String.fromCharCode(parseInt(line.slice(j + 2, j + 4), 16));
            j += 4;
          } else {
            throw new OptionsError(`bad escape in string at column ${j + 1}`);
          }
        } else {
          s += d;
          j++;
        }
      }
      toks.push({ k: 'str', s, col });
      i = j + 1;
    } else if ('.()[]{},:='.includes(c)) {
      toks.push({ k: 'p', s: c, col });
      i++;
    } else {
      throw new OptionsError(`unexpected character ${JSON.stringify(c)} at column ${col}`);
    }
  }
  toks.push({ k: 'end', col: line.length + 1 });
  return toks;
}

/** A name or a call in a dotted chain: `Training.gradientAccumulation(2)`. */
type Seg = { name: string; col: number; args?: Expr[] };
type Expr =
  | { k: 'lit'; v: unknown }
  | { k: 'list'; items: Expr[] }
  | { k: 'dict'; entries: [string, Expr][] }
  | { k: 'chain'; segs: Seg[] };

class LineParser {
  private i = 0;
  /** Brackets, parentheses and braces open at the current token. */
  private depth = 0;
  constructor(private readonly toks: Tok[]) {}

  /**
   * Opens one level at the bracket just read (token i-1). The parser and evalExpr recurse once per
   * level: past MAX_NESTING (the model language's limit) the line is refused, not the stack overflowed.
   */
  private enter(): void {
    if (++this.depth > MAX_NESTING) {
      const e = new OptionsError(`this nests more than ${MAX_NESTING} levels deep (brackets, parentheses, braces and calls count); write the value flatter`);
      e.col = this.toks[this.i - 1]!.col;
      throw e;
    }
  }

  private peek(): Tok {
    return this.toks[this.i]!;
  }
  private isP(s: string): boolean {
    const t = this.peek();
    return t.k === 'p' && t.s === s;
  }
  private expectP(s: string): void {
    if (!this.isP(s)) throw new OptionsError(`expected '${s}' ${this.where()}`);
    this.i++;
  }
  private where(): string {
    const t = this.peek();
    if (t.k === 'end') return 'at the end of the line';
    const text = t.k === 'id' || t.k === 'p' ? t.s : t.k === 'num' ? String(t.n) : JSON.stringify(t.s);
    return `at column ${t.col} (found ${text})`;
  }

  statement(): Seg[] {
    const segs = this.chain();
    if (this.peek().k !== 'end') throw new OptionsError(`unexpected text ${this.where()}; write one setter call per line`);
    return segs;
  }

  private chain(): Seg[] {
    const segs: Seg[] = [];
    for (;;) {
      const t = this.peek();
      if (t.k !== 'id') throw new OptionsError(`expected a name ${this.where()}`);
      this.i++;
      const seg: Seg = { name: t.s, col: t.col };
      if (this.isP('(')) {
        this.i++;
        seg.args = this.items(')');
      }
      segs.push(seg);
      if (!this.isP('.')) return segs;
      this.i++;
    }
  }

  private items(close: string): Expr[] {
    this.enter();
    const out: Expr[] = [];
    while (!this.isP(close)) {
      const t = this.peek();
      const next = this.toks[this.i + 1];
      if (t.k === 'id' && next !== undefined && next.k === 'p' && next.s === '=') {
        throw new OptionsError(`keyword argument '${t.s}=' at column ${t.col} is not supported; pass arguments by position`);
      }
      out.push(this.expr());
      if (this.isP(',')) this.i++;
      else if (!this.isP(close)) throw new OptionsError(`expected ',' or '${close}' ${this.where()}`);
    }
    this.i++;
    this.depth--;
    return out;
  }

  expr(): Expr {
    const t = this.peek();
    if (t.k === 'num') {
      this.i++;
      return { k: 'lit', v: t.n };
    }
    if (t.k === 'str') {
      this.i++;
      return { k: 'lit', v: t.s };
    }
    if (t.k === 'p' && t.s === '[') {
      this.i++;
      return { k: 'list', items: this.items(']') };
    }
    if (t.k === 'p' && t.s === '(') {
      this.i++;
      const items = this.items(')');
      return items.length === 1 ? items[0]! : { k: 'list', items };
    }
    if (t.k === 'p' && t.s === '{') {
      this.i++;
      this.enter();
      const entries: [string, Expr][] = [];
      while (!this.isP('}')) {
        const key = this.peek();
        if (key.k !== 'str') throw new OptionsError(`dictionary keys must be strings such as "IPU0" ${this.where()}`);
        this.i++;
        this.expectP(':');
        entries.push([key.s, this.expr()]);
        if (this.isP(',')) this.i++;
        else if (!this.isP('}')) throw new OptionsError(`expected ',' or '}' ${this.where()}`);
      }
      this.i++;
      this.depth--;
      return { k: 'dict', entries };
    }
    if (t.k === 'id') return { k: 'chain', segs: this.chain() };
    throw new OptionsError(`expected a value ${this.where()}`);
  }
}

const CONSTANTS: Record<string, unknown> = { True: true, False: false, None: null, true: true, false: false, null: null };
const TORCH_DTYPES: Record<string, PartialsType> = { float: 'float32', float32: 'float32', half: 'float16', float16: 'float16' };

/** Classes an options file may construct, and the methods it may call on them. */
const FILE_CLASSES: Record<string, (args: unknown[]) => object> = {
  TensorLocationSettings: (a) => {
    if (a.length > 0) throw new OptionsError('TensorLocationSettings() takes no arguments');
    return new TensorLocationSettings();
  },
  Stage: (a) => new Stage(...(a as string[])),
  Phase: (a) => new Phase(...(a as (Stage | string)[])),
  PipelinedExecution: (a) => new PipelinedExecution(...(a as string[])),
  ShardedExecution: (a) => new ShardedExecution(...(a as string[])),
  SerialPhasedExecution: (a) => new SerialPhasedExecution(...(a as PhaseArg[])),
  ParallelPhasedExecution: (a) => new ParallelPhasedExecution(...(a as PhaseArg[])),
};

const OPTIONS_SETTERS = [
  'deviceIterations', 'replicationFactor', 'inputReplicaGrouping', 'outputMode', 'anchorTensor',
  'sourceLocationExcludes', 'appendToLocationExcludes', 'randomSeed', 'enableExecutableCaching',
  'executableTimeout', 'enableSyntheticData', 'connectionType', 'useIpuModel', 'useOfflineIpuTarget', 'useIpuId',
  'autoRoundNumIPUs', 'setAvailableMemoryProportion', 'syncPattern', 'broadcastBuffers', 'modelName',
  'logDir', 'maxRepeatLogs', 'logCycleCount', 'enableProfiling', 'showCompilationProgressBar', 'setExecutionStrategy',
  'enableStableNorm', 'disableModuleNamescope', 'relaxOptimizerAttributesChecks',
];

function fileMethods(obj: object): readonly string[] {
  if (obj instanceof Options) return OPTIONS_SETTERS;
  if (obj instanceof TrainingOptions) return Object.values(TRAINING_SETTERS);
  if (obj instanceof PrecisionOptions) return Object.values(PRECISION_SETTERS);
  if (obj instanceof TensorLocationOptions) return [...Object.values(LOCATION_SETTERS), 'numIOTiles'];
  if (obj instanceof DistributedOptions) return ['configureProcessId', 'setEnvVarNames', 'disable'];
  if (obj instanceof PopartOptions) return ['set'];
  if (obj instanceof TensorLocationSettings) {
    return [
      'useOnChipStorage',
      'useReplicatedTensorSharding',
      'minElementsForOffChip',
      'minElementsForReplicatedTensorSharding',
      'useIOTilesToLoad',
      'useIOTilesToStore',
    ];
  }
  if (obj instanceof Stage) return ['ipu'];
  if (obj instanceof Phase) return ['ipus'];
  if (obj instanceof PipelinedExecution) return ['setPipelineSchedule'];
  if (obj instanceof SerialPhasedExecution) return ['useSeparateBackwardPhase', 'setTensorsLiveness'];
  if (obj instanceof ParallelPhasedExecution) return ['useSeparateBackwardPhase', 'sendTensorsOffChipAfterFwd'];
  return [];
}


function unknownName(name: string, candidates: readonly string[], what: string): OptionsError {
  const best = candidates
    .map((c) => ({ c, d: editDistance(name, c, true) }))
    .filter((x) => x.d <= Math.max(2, Math.floor(name.length / 3)))
    .sort((x, y) => x.d - y.d)[0];
  return new OptionsError(`unknown ${what} '${name}'${best ? `; did you mean '${best.c}'?` : ''}`);
}

function typeName(obj: object): string {
  if (obj instanceof Options) return 'Options';
  if (obj instanceof TrainingOptions) return 'Training';
  if (obj instanceof PrecisionOptions) return 'Precision';
  if (obj instanceof TensorLocationOptions) return 'TensorLocations';
  if (obj instanceof DistributedOptions) return 'Distributed';
  if (obj instanceof PopartOptions) return '_Popart';
  return obj.constructor.name;
}

/** Apply method-call segments to `target`; each must be a call of a method the file may use. */
function callChain(target: object, segs: Seg[]): object {
  let cur = target;
  for (const seg of segs) {
    const methods = fileMethods(cur);
    if (!methods.includes(seg.name)) throw unknownName(seg.name, methods, `${typeName(cur)} setter`);
    if (seg.args === undefined) {
      throw new OptionsError(`'${seg.name}' is a setter; call it with its arguments, e.g. ${seg.name}(...)`);
    }
    const args = seg.args.map(evalExpr);
    const fn = (cur as Record<string, (...a: unknown[]) => object>)[seg.name]!;
    cur = fn.apply(cur, args);
  }
  return cur;
}

function evalExpr(e: Expr): unknown {
  if (e.k === 'lit') return e.v;
  if (e.k === 'list') return e.items.map(evalExpr);
  if (e.k === 'dict') return Object.fromEntries(e.entries.map(([k, v]) => [k, evalExpr(v)]));
  let segs = e.segs;
  if (segs.length > 1 && (segs[0]!.name === 'poptorch' || segs[0]!.name === 'tilegraph') && segs[0]!.args === undefined) {
    segs = segs.slice(1);
  }
  const head = segs[0]!;
  if (head.args === undefined && segs.length === 1 && head.name in CONSTANTS) return CONSTANTS[head.name];
  if (head.name === 'torch' && head.args === undefined && segs.length === 2 && segs[1]!.args === undefined) {
    const dt = TORCH_DTYPES[segs[1]!.name];
    if (dt === undefined) {
      throw new OptionsError(`unsupported dtype torch.${segs[1]!.name}; expected torch.float32 or torch.float16`);
    }
    return dt;
  }
  const en = FILE_ENUMS[head.name];
  if (en !== undefined && head.args === undefined) {
    const member = segs[1];
    if (segs.length !== 2 || member!.args !== undefined) throw new OptionsError(`expected ${head.name}.<member>`);
    const v = en[member!.name];
    if (v === undefined) throw unknownName(member!.name, Object.keys(en), `${head.name} member`);
    return v;
  }
  const make = FILE_CLASSES[head.name];
  if (make !== undefined) {
    if (head.args === undefined) throw new OptionsError(`${head.name} must be called, e.g. ${head.name}()`);
    return callChain(make(head.args.map(evalExpr)), segs.slice(1));
  }
  throw unknownName(
    segs.map((s) => s.name).join('.'),
    [...Object.keys(FILE_ENUMS), ...Object.keys(FILE_CLASSES), 'True', 'False', 'None'],
    'name',
  );
}

/** Run one line of an options file against `opts`. */
function runOptionsLine(opts: Options, line: string): void {
  const toks = tokenize(line);
  if (toks.length === 1) return; // blank or comment
  const segs = new LineParser(toks).statement();
  const head = segs[0]!;
  if (head.name === 'options' && head.args === undefined && segs.length > 1) {
    throw new OptionsError("omit the 'options.' prefix: write e.g. deviceIterations(4)");
  }
  let target: object = opts;
  let rest = segs;
  if ((SUB_OBJECTS as readonly string[]).includes(head.name) && head.args === undefined) {
    target = (opts as unknown as Record<string, object>)[head.name]!;
    rest = segs.slice(1);
    if (rest.length === 0) {
      const example = `${head.name}.${fileMethods(target)[0]}(...)`;
      throw new OptionsError(`'${head.name}' alone sets nothing; call one of its setters, e.g. ${example}`);
    }
  } else if (!OPTIONS_SETTERS.includes(head.name)) {
    throw unknownName(head.name, [...OPTIONS_SETTERS, ...SUB_OBJECTS], 'option');
  }
  callChain(target, rest);
}
