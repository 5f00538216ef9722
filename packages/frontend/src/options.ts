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

export { OptionsError } from './options/checks.js';
export { AutoStage, CommGroupType, ConnectionType, HalfFloatCastingBehavior, Liveness, MatMulSerializationMode, MeanReductionStrategy, OutputMode, OverlapMode, PipelineSchedule, RecomputationType, ReductionType, SyncPattern, VariableRetrievalMode } from './options/enums.js';
export type { ModelKind, PartialsType } from './options/enums.js';
export { ExecutionStrategy, ParallelPhasedExecution, Phase, PhasedExecution, PipelinedExecution, SerialPhasedExecution, ShardedExecution, Stage, executionStrategyFromJSON } from './options/execution.js';
export type { BlockPlacement, ExecutionStrategyJSON, StageJSON } from './options/execution.js';
export { TensorLocationSettings } from './options/locations.js';
export type { TensorLocationValues } from './options/locations.js';
export { DEFAULT_AUTOMATIC_LOSS_SCALING_SETTINGS, DistributedOptions, PopartOptions, PrecisionOptions, TensorLocationOptions, TrainingOptions } from './options/groups.js';
export type { AutomaticLossScalingSettingsJSON, DistributedJSON, PrecisionJSON, TensorLocationsJSON, TrainingJSON } from './options/groups.js';
export { DEFAULT_SOURCE_LOCATION_EXCLUDES, HARDWARE_ONLY_OPTIONS, Options } from './options/options.js';
export type { AnchorJSON, HardwareOnlyOption, OptionsJSON, OptionsProblem } from './options/options.js';
