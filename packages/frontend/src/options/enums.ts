/** Enumerations (PopTorch's poptorch.enums): the values are the member names unless PopTorch uses strings. */

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
export const RECOMPUTATION_BY_INT: readonly RecomputationType[] = [
  RecomputationType.None,
  RecomputationType.Standard,
  RecomputationType.NormOnly,
  RecomputationType.Pipeline,
  RecomputationType.RecomputeAll,
];

/** The enumerations an options file may name (`OutputMode.All`, `poptorch.Liveness.AlwaysLive`). */
export const FILE_ENUMS: Record<string, Record<string, string>> = {
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
