/** The option groups: Training, Precision, TensorLocations, _Popart and Distributed. */
import { OptionsError, checkBool, checkEnum, checkNonEmptyString, checkNonNegativeInt, checkPositiveInt, fmt } from './checks.js';
import { HalfFloatCastingBehavior, MeanReductionStrategy, PartialsType, RECOMPUTATION_BY_INT, RecomputationType, ReductionType } from './enums.js';
import { TensorLocationSettings, TensorLocationValues } from './locations.js';

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

export const LOCATION_SLOTS = ['location_activation', 'location_weight', 'location_optimizer', 'location_accumulator'] as const;
export const LOCATION_SETTERS: Record<(typeof LOCATION_SLOTS)[number], string> = {
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

export const LOSS_SCALING_KEYS: Record<string, keyof AutomaticLossScalingSettingsJSON> = {
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
    private readonly setOutlining: (on: boolean) => void = () => {},
  ) {}

  /**
   * `set("autoRecomputation", n)`: n is PopART's RecomputationType integer (0 None, 1 Standard,
   * 2 NormOnly, 3 Pipeline, 4 RecomputeAll) or a RecomputationType member.
   * `set("enableOutlining", b)`: lower repeated layers once, as a function (default true).
   */
  set(key: string, value: unknown): this {
    const option = '_Popart.set';
    // automaticLossScalingSettings.enabled is what Training.setAutomaticLossScaling sets in PopTorch
    if (key === 'automaticLossScalingSettings.enabled') {
      this.setLossScaling('enabled', checkBool(`${option}(${fmt(key)})`, value));
      return this;
    }
    if (key === 'enableOutlining') {
      this.setOutlining(checkBool(`${option}(${fmt(key)})`, value));
      return this;
    }
    const als = LOSS_SCALING_KEYS[key];
    if (als) {
      this.setLossScaling(als, checkLossScalingSetting(`${option}(${fmt(key)})`, als, value));
      return this;
    }
    if (key !== 'autoRecomputation') {
      const known = ['autoRecomputation', 'enableOutlining', 'automaticLossScalingSettings.enabled', ...Object.keys(LOSS_SCALING_KEYS)];
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
