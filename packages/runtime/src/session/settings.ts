import { CommGroup, Diagnostic, DiagnosticError, VariableRetrievalMode as IrRetrieval, error, warning } from '@tilegraph/ir';
import { AutoStage, CommGroupType, ExecutionStrategy, Options, OptionsError, PhasedExecution, PipelinedExecution, PipelineSchedule, ReductionType, MeanReductionStrategy, ShardedExecution, Stage, VariableRetrievalMode } from '@tilegraph/frontend';
import { MeanReductionStrategy as StepStrategy, RecomputationMode, ReplicaGroupingSetting, StepSettings, TensorLocations, ExecutionSpec, StageSpec } from '@tilegraph/passes';

/** The step settings a model is built for, from PopTorch-style Options: what sessions and the command line share. */

/** Per-weight replica grouping, as PopTorch's `per_replica_params`: (CommGroupType, shards, VariableRetrievalMode). */
export interface WeightGrouping {
  readonly type: CommGroupType;
  readonly shards: number;
  readonly retrieval?: VariableRetrievalMode;
}

export function commGroup(type: CommGroupType, size: number): CommGroup {
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
    // a run over several processes is one replica set of processes × replicationFactor
    replicationFactor: o.replication_factor * o.Distributed.numProcesses,
    gradientAccumulation: o.Training.gradient_accumulation,
    reduction: o.Training.accumulation_and_replication_reduction_type === ReductionType.Sum ? 'sum' : 'mean',
    ...(strategy ? { meanStrategy: strategy as StepStrategy } : {}),
    replicaGrouping: grouping,
    // RecomputationType members are PopART's names; the step settings use them lower-cased
    recomputation: o.auto_recomputation.toLowerCase() as RecomputationMode,
    ...tensorLocationsFrom(o),
    execution: executionSpecFrom(o.execution_strategy),
    ...automaticLossScalingFrom(o),
    ...(o.TensorLocations.num_io_tiles !== undefined ? { ioTiles: o.TensorLocations.num_io_tiles } : {}),
  };
}

/** Training.setAutomaticLossScaling(true) with PopART's automaticLossScalingSettings, as the step settings take it. */
function automaticLossScalingFrom(o: Options): Pick<StepSettings, 'automaticLossScaling'> {
  if (!o.Training.automatic_loss_scaling) return {};
  const s = o.automatic_loss_scaling_settings;
  return { automaticLossScaling: { binEdgeLocation: s.bin_edge_location, thresholdUpperCountProportion: s.threshold_upper_count_proportion, updatePeriod: s.update_period } };
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
      ...(st.pipeline_schedule !== PipelineSchedule.Grouped ? { pipelineSchedule: st.pipeline_schedule.toLowerCase() as 'interleaved' | 'sequential' } : {}),
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
export function asDiagnostic<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof OptionsError) throw new DiagnosticError(error(e.message));
    throw e;
  }
}

/**
 * Warnings, said once per compile, for options accepted but without effect where the model runs:
 * hardware-only options away from IPU hardware. (Automatic loss scaling says itself, from the
 * training passes, when it cannot apply; on an inference model Options.validateFor says so.)
 */
export function optionsWithoutEffect(options: Options, kind: 'training' | 'inference', onIpuHardware: boolean): Diagnostic[] {
  const out: Diagnostic[] = [];
  const ignored = options.hardwareOnlyOptions();
  if (ignored.length && !onIpuHardware) {
    out.push(
      warning(`options that need IPU hardware have no effect here: ${ignored.map((h) => `${h.option}(${JSON.stringify(h.value)})`).join(', ')}`, undefined, [
        'they take effect when the Poplar SDK builds the program for an IPU system',
      ]),
    );
  }
  return out;
}

/** The options a compiled step depends on (the output mode is applied on the host and may change). */
export function compiledOptions(o: Options): Record<string, unknown> {
  // through the getters: a run checks these, and the whole toJSON() cost more than a tiny model's run
  return {
    deviceIterations: o.device_iterations,
    replicationFactor: o.replication_factor,
    inputReplicaGrouping: [o.input_group_size, o.input_group_type],
    anchorTensor: o.anchored_tensors,
    randomSeed: o.random_seed,
    enableSyntheticData: o.synthetic_data,
    autoRecomputation: o.auto_recomputation,
    automaticLossScalingSettings: o.automatic_loss_scaling_settings,
    Training: o.Training.toJSON(),
    TensorLocations: o.TensorLocations.toJSON(),
  };
}
