import { DiagnosticError, Rng, Tensor, allocData, error, formatShape, numElements, shapesEqual } from '@tilegraph/ir';
import { Options } from '@tilegraph/frontend';

/** One sample: a tensor per model input name. */
export type Sample = Readonly<Record<string, Tensor>>;

/** A map-style dataset (torch.utils.data.Dataset): `length` samples, read by index. */
export interface Dataset {
  readonly length: number;
  get(index: number): Sample;
}

/**
 * What a DataLoader reads from: a Dataset; an array of samples; or columns by input name, each a
 * tensor whose first dimension indexes the samples or an array of per-sample tensors.
 */
export type DataSource = Dataset | readonly Sample[] | Readonly<Record<string, Tensor | readonly Tensor[]>>;

export interface DataLoaderSettings {
  /** Samples per micro-batch (PopTorch's batch_size; default 1). */
  readonly batchSize?: number;
  /** Visit the samples in a new random order each epoch (default false). */
  readonly shuffle?: boolean;
  /** Seed of the shuffle (default: Options.randomSeed, else 0). Processes of one run must agree. */
  readonly seed?: number;
  /** Drop the samples that do not fill a whole run (default true, as PopTorch). */
  readonly dropLast?: boolean;
  /** Give each process of a distributed run its own part of the dataset (default true). */
  readonly autoDistributedPartitioning?: boolean;
}

function fail(message: string, notes: string[] = []): never {
  throw new DiagnosticError(error(`DataLoader: ${message}`, undefined, notes));
}

function isDataset(d: DataSource): d is Dataset {
  return !Array.isArray(d) && typeof (d as Dataset).get === 'function' && typeof (d as Dataset).length === 'number';
}

/** Reads one sample of a column given as a batched tensor (first dim = samples). */
function sampleOf(t: Tensor, i: number): Tensor {
  const shape = t.shape.slice(1);
  const size = numElements(shape);
  return new Tensor(t.dtype, shape, t.data.slice(i * size, (i + 1) * size));
}

/** Normalises the accepted data sources to a Dataset. */
function asDataset(src: DataSource): Dataset {
  if (isDataset(src)) {
    if (!Number.isInteger(src.length) || src.length < 0) fail(`the dataset length must be a non-negative integer, got ${src.length}`);
    return src;
  }
  if (Array.isArray(src)) {
    const samples = src as readonly Sample[];
    return { length: samples.length, get: (i) => samples[i]! };
  }
  const columns = Object.entries(src as Readonly<Record<string, Tensor | readonly Tensor[]>>);
  if (columns.length === 0) fail('the dataset has no columns');
  const lengths = columns.map(([name, c]) => {
    if (c instanceof Tensor) {
      if (c.shape.length === 0) fail(`column '${name}' is a scalar; its first dimension must index the samples`);
      return c.shape[0]!;
    }
    if (!Array.isArray(c)) fail(`column '${name}' must be a tensor or an array of tensors`);
    return c.length;
  });
  if (lengths.some((n) => n !== lengths[0])) {
    fail('the columns hold different numbers of samples', columns.map(([name], k) => `${name}: ${lengths[k]}`));
  }
  return {
    length: lengths[0]!,
    get: (i) => Object.fromEntries(columns.map(([name, c]) => [name, c instanceof Tensor ? sampleOf(c, i) : (c as readonly Tensor[])[i]!])),
  };
}

/**
 * PopTorch's DataLoader: each item is the data of one run of a trainingModel / inferenceModel,
 * `combinedBatchSize` samples concatenated along the first dimension in the order the run splits
 * them (micro-batches of `batchSize` consecutive samples).
 *
 *   combinedBatchSize = batchSize × deviceIterations × (replicationFactor / inputReplicaGrouping
 *                       size) × gradientAccumulation
 *
 * (replicas of one input group read the same micro-batch, so a run consumes only one micro-batch
 * per group; PopTorch's executor checks its inputs against the same product).
 *
 * Distributed runs (Options.Distributed with numProcesses P): as PopTorch's _SubDataset, process p
 * reads samples [p·L, (p+1)·L) with L = C·⌊N / (C·P)⌋ (C the combined batch size, N the dataset
 * length), so all processes run the same number of steps on disjoint parts. With shuffling, the
 * whole dataset is permuted first with the same seed on every process, then partitioned, so the
 * parts stay disjoint.
 *
 * Shuffling draws a Fisher–Yates permutation from the xoshiro128** generator of @tilegraph/ir
 * (`Rng(seed, epoch)`): the same seed gives the same order on every machine, and each epoch
 * (each new iteration) has its own order.
 */
export class DataLoader implements Iterable<Record<string, Tensor>> {
  readonly options: Options;
  readonly dataset: Dataset;
  readonly batchSize: number;
  readonly shuffle: boolean;
  readonly seed: number;
  readonly dropLast: boolean;
  /** Samples consumed by one run. */
  readonly combinedBatchSize: number;
  /** Samples this process reads per epoch (a multiple of combinedBatchSize). */
  readonly samplesPerEpoch: number;
  private readonly processId: number;
  private readonly numProcesses: number;
  private readonly partitioned: boolean;
  private epochs = 0;

  constructor(options: Options, dataset: DataSource, settings: DataLoaderSettings = {}) {
    if (!(options instanceof Options)) fail('the first argument must be an Options object');
    const optionErrors = options.problemsFor().filter((p) => p.severity === 'error');
    if (optionErrors.length) fail('the options are inconsistent', optionErrors.map((p) => `${p.option}: ${p.message}`));
    const batchSize = settings.batchSize ?? 1;
    if (!Number.isInteger(batchSize) || batchSize < 1) fail(`batchSize must be a positive integer, got ${batchSize}`);
    const seed = settings.seed ?? options.random_seed ?? 0;
    if (!Number.isInteger(seed)) fail(`seed must be an integer, got ${seed}`);
    this.options = options;
    this.dataset = asDataset(dataset);
    this.batchSize = batchSize;
    this.shuffle = settings.shuffle ?? false;
    this.seed = seed;
    this.dropLast = settings.dropLast ?? true;
    const inputGroups = options.replication_factor / options.input_group_size;
    this.combinedBatchSize = batchSize * options.device_iterations * inputGroups * options.Training.gradient_accumulation;
    this.partitioned = settings.autoDistributedPartitioning ?? true;
    this.processId = this.partitioned ? options.Distributed.processId : 0;
    this.numProcesses = this.partitioned ? options.Distributed.numProcesses : 1;

    const N = this.dataset.length;
    const C = this.combinedBatchSize;
    const P = this.numProcesses;
    const per = C * P;
    const how = `${batchSize} (batchSize) × ${options.device_iterations} (deviceIterations) × ${inputGroups} (replicationFactor ${options.replication_factor} / input group size ${options.input_group_size}) × ${options.Training.gradient_accumulation} (gradientAccumulation)`;
    const processes = P > 1 ? ` × ${P} processes` : '';
    if (N < per) {
      fail(`the dataset has ${N} samples, fewer than one run needs (${C}${processes})`, [`combinedBatchSize = ${how} = ${C}`]);
    }
    if (!this.dropLast && N % per !== 0) {
      fail(`the dataset's ${N} samples do not divide into runs of ${C}${processes} and dropLast is false`, [
        `combinedBatchSize = ${how} = ${C}`,
        `set dropLast: true to drop the last ${N % per} samples of each epoch`,
      ]);
    }
    this.samplesPerEpoch = C * Math.floor(N / per);
  }

  /** Runs per epoch. */
  get length(): number {
    return this.samplesPerEpoch / this.combinedBatchSize;
  }

  /** The dataset indices this process reads in epoch `epoch`, in order. */
  indices(epoch: number): number[] {
    const N = this.dataset.length;
    const order = Array.from({ length: N }, (_, i) => i);
    if (this.shuffle) {
      const rng = new Rng(this.seed, epoch);
      for (let i = N - 1; i > 0; i--) {
        // an integer in [0, i] from 32 random bits
        const j = Math.floor((rng.nextU32() / 4294967296) * (i + 1));
        const t = order[i]!;
        order[i] = order[j]!;
        order[j] = t;
      }
    }
    const start = this.processId * this.samplesPerEpoch;
    return order.slice(start, start + this.samplesPerEpoch);
  }

  /** The data of run `k` of epoch `epoch`. */
  batch(epoch: number, k: number, indices = this.indices(epoch)): Record<string, Tensor> {
    if (!Number.isInteger(k) || k < 0 || k >= this.length) fail(`run ${k} is out of range (an epoch has ${this.length})`);
    const C = this.combinedBatchSize;
    return this.collate(indices.slice(k * C, (k + 1) * C));
  }

  private collate(idx: readonly number[]): Record<string, Tensor> {
    const first = this.dataset.get(idx[0]!);
    const names = Object.keys(first);
    if (names.length === 0) fail(`sample ${idx[0]} has no tensors`);
    const out: Record<string, Tensor> = {};
    const samples = idx.map((i) => {
      const s = i === idx[0] ? first : this.dataset.get(i);
      const keys = Object.keys(s);
      if (keys.length !== names.length || !names.every((n) => n in s)) {
        fail(`sample ${i} has tensors ${keys.join(', ')} but sample ${idx[0]} has ${names.join(', ')}`);
      }
      return s;
    });
    for (const name of names) {
      const t0 = first[name]!;
      if (!(t0 instanceof Tensor)) fail(`sample ${idx[0]}: '${name}' is not a Tensor`);
      const size = t0.size;
      const data = allocData(t0.dtype, size * idx.length);
      samples.forEach((s, k) => {
        const t = s[name]!;
        if (!(t instanceof Tensor) || t.dtype !== t0.dtype || !shapesEqual(t.shape, t0.shape)) {
          const got = t instanceof Tensor ? `${t.dtype}${formatShape(t.shape)}` : String(t);
          fail(`sample ${idx[k]}: '${name}' is ${got} but sample ${idx[0]} has ${t0.dtype}${formatShape(t0.shape)}`);
        }
        data.set(t.data as never, k * size);
      });
      out[name] = new Tensor(t0.dtype, [idx.length, ...t0.shape], data);
    }
    return out;
  }

  /** One epoch: the data of each run in turn. Each new iteration is a new epoch. */
  *[Symbol.iterator](): Iterator<Record<string, Tensor>> {
    const epoch = this.epochs++;
    const indices = this.indices(epoch);
    for (let k = 0; k < this.length; k++) yield this.batch(epoch, k, indices);
  }
}
