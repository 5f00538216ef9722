/** Execution strategies: stages, phases, pipelined, sharded and phased execution (setExecutionStrategy). */
import { OptionsError, checkBool, checkEnum, checkNonNegativeInt, fmt, isPlainObject } from './checks.js';
import { AutoStage, Liveness, PipelineSchedule } from './enums.js';

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
export type PhaseArg = Phase | Stage | string | (Stage | string)[];

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

export function checkKeys(obj: Record<string, unknown>, accepted: readonly string[], where: string): void {
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
