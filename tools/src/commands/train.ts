import { Command } from 'commander';
import cliProgress from 'cli-progress';
import { Options } from '@tilegraph/frontend';
import { DiagnosticError, Graph, GraphBuilder, Rng, Tensor, error, isFloat, warning } from '@tilegraph/ir';
import { formatTimings, makeOptimizer } from '@tilegraph/passes';
import { findToolchain, referenceBackend, saveWeights, trainingModel, weightsFormatOf } from '@tilegraph/runtime';
import { UsageError, stderrReporter } from '../diagnostics.js';
import { checkOutputFile } from '../files.js';
import { loadModel } from '../load.js';
import { modelArgs } from './step.js';
import { IMPORT_PATH_FLAG, finiteNumber, importPathsOf, naturalInt, positiveInt, positiveNumber } from '../flags.js';
import { OPTIMIZER_FLAGS, loadOptionsFile, optimizerFromFlag } from '../options.js';
import { passFlags, registerPassFlags } from './passflags.js';

/**
 * A learnable synthetic classification task: float inputs are standard normal; each integer
 * input (the labels) is the arg-max of a fixed random linear "teacher" applied to the first float
 * input (its first 64 features), so a model that can represent a linear classifier drives its loss down.
 */
export class TeacherDataset {
  readonly length: number;
  private readonly samples: Record<string, number[]>[] = [];
  private readonly shapes: Record<string, { dtype: Tensor['dtype']; shape: number[] }> = {};

  constructor(g: Graph, length: number, classes: number, seed: number) {
    this.length = length;
    const rng = new Rng(seed, 7);
    const inputs = g.inputs().map((o) => ({ name: o.attrs['name'] as string, type: o.result.type }));
    const floats = inputs.filter((i) => isFloat(i.type.dtype));
    // the teacher reads at most the first 64 features, so its size stays small for wide inputs
    const features = Math.min(64, floats[0] ? floats[0].type.shape.slice(1).reduce((a, d) => a * d, 1) : 0);
    const teacher = Float64Array.from({ length: classes * features }, () => rng.normal());
    for (const i of inputs) this.shapes[i.name] = { dtype: i.type.dtype, shape: i.type.shape.slice(1) };
    for (let n = 0; n < length; n++) {
      const s: Record<string, number[]> = {};
      for (const i of inputs) {
        const size = i.type.shape.slice(1).reduce((a, d) => a * d, 1);
        if (isFloat(i.type.dtype)) s[i.name] = Array.from({ length: size }, () => rng.normal());
      }
      const x = floats[0] ? s[floats[0].name]! : [];
      let best = 0;
      let bestScore = -Infinity;
      for (let c = 0; c < classes; c++) {
        let score = 0;
        for (let f = 0; f < features; f++) score += teacher[c * features + f]! * x[f]!;
        if (score > bestScore) [best, bestScore] = [c, score];
      }
      for (const i of inputs) {
        if (!isFloat(i.type.dtype)) {
          const size = i.type.shape.slice(1).reduce((a, d) => a * d, 1);
          s[i.name] = Array.from({ length: size }, () => best);
        }
      }
      this.samples.push(s);
    }
  }

  /** The samples at `indices`, stacked along a new first dimension per input. */
  batch(indices: readonly number[]): Record<string, Tensor> {
    const out: Record<string, Tensor> = {};
    for (const [name, { dtype, shape }] of Object.entries(this.shapes)) {
      const values: number[] = [];
      for (const k of indices) values.push(...this.samples[k]![name]!);
      out[name] = Tensor.from(dtype, [indices.length, ...shape], values);
    }
    return out;
  }
}

/** Appends a loss on the first output: PyTorch's CrossEntropyLoss(mean) or MSELoss(mean). */
function withLoss(g: Graph, kind: string): Graph {
  if (g.ops.some((op) => op.kind === 'identity_loss')) throw new UsageError('--loss: the model already has a loss');
  const out = g.outputs[0];
  if (!out) throw new UsageError('--loss: the model has no output to put a loss on');
  const b = new GraphBuilder(g);
  const t = out.value.type;
  let loss;
  if (kind === 'cross_entropy') {
    if (t.shape.length < 2) throw new UsageError(`--loss cross_entropy needs an output of class scores [batch, classes, ...]; '${out.name}' is ${t.dtype}[${t.shape}]`);
    const labels = b.input('labels', 'int32', [t.shape[0]!, ...t.shape.slice(2)]);
    loss = b.op('cross_entropy', [out.value, labels]);
  } else if (kind === 'mse') {
    const targets = b.input('targets', t.dtype, t.shape);
    const d = b.op('sub', [out.value, targets]);
    loss = b.op('reduce_mean', [b.op('mul', [d, d])]);
  } else {
    throw new UsageError(`--loss must be cross_entropy or mse, got '${kind}'`);
  }
  b.output('loss', b.op('identity_loss', [loss], { reduction: 'mean' }));
  return g;
}

/** Classes of the task: the class dimension of an output named logits, else 2. */
function classCount(g: Graph): number {
  const logits = g.outputs.find((o) => o.name === 'logits');
  const s = logits?.value.type.shape;
  return s && s.length >= 2 ? s[1]! : 2;
}

function mean(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0) / Math.max(xs.length, 1);
}

interface TrainFlags {
  steps: number;
  optimizer: string;
  lr?: number;
  options?: string;
  batchSize?: number;
  samples: number;
  seed: number;
  replicas?: number;
  accumulation?: number;
  deviceIterations?: number;
  save?: string;
  backend: string;
  loss?: string;
  progress: boolean;
  stopOnNan?: boolean;
  timeout?: number;
}

export function registerTrain(program: Command): void {
  const cmd = program
    .command('train')
    .description('train a model on a synthetic classification task and print the loss')
    .argument('<model>', 'model file (.tg, .onnx or .tgir) with a loss')
    .option('--steps <n>', 'optimizer steps', positiveInt, 50)
    .option('--optimizer <name>', `one of ${Object.keys(OPTIMIZER_FLAGS).join(', ')}`, 'sgd')
    .option('--lr <x>', 'learning rate', finiteNumber)
    .option('--options <file>', 'options: JSON, or PopTorch-style setters one a line')
    .option('--batch-size <n>', "micro-batch size (the model's `batch` parameter)", positiveInt)
    .option('--arg <name=value...>', 'a parameter of a model-language model (numbers, true/false or text), e.g. --arg layers=4')
    .option(...IMPORT_PATH_FLAG)
    .option('--samples <n>', 'size of the synthetic data set', positiveInt, 1024)
    .option('--seed <n>', 'seed of the data set and shuffling', naturalInt, 0)
    .option('--replicas <n>', 'replicationFactor', positiveInt)
    .option('--accumulation <n>', 'Training.gradientAccumulation', positiveInt)
    .option('--device-iterations <n>', 'deviceIterations', positiveInt)
    .option('--backend <target>', 'where the step runs: ipu (compiled: the Poplar SDK if popc is on PATH, else the poplar-host emulation) or reference (the IR interpreter)', 'ipu')
    .option('--loss <kind>', 'add a loss to a model that has none (an ONNX export returning logits): cross_entropy (labels input "labels") or mse (targets input "targets"), on the first output')
    .option('--save <file>', 'write the trained weights: safetensors (.safetensors) or JSON (.json), by the extension')
    .option('--stop-on-nan', 'stop at the first step whose loss is NaN or infinite (exit code 1, nothing saved)')
    .option('--timeout <seconds>', 'longest wait for one step of the compiled executable before it is stopped (default 600)', positiveNumber)
    .option('--no-progress', 'no progress bar');
  registerPassFlags(cmd);
  cmd.action((model: string, o: TrainFlags & Record<string, unknown>) => {
    for (const [k, v] of Object.entries({ steps: o.steps, samples: o.samples })) {
      if (!Number.isInteger(v) || v < 1) throw new UsageError(`--${k} must be a positive integer`);
    }
    // the weights are written after training: check where before it starts
    if (o.save) checkOutputFile(o.save, '--save', [model, ...(o.options ? [o.options] : [])]);
    if (o.save && !weightsFormatOf(o.save)) throw new UsageError(`--save ${o.save}: name the file .safetensors (safetensors, for PyTorch and NumPy too) or .json (JSON)`);
    const optType = optimizerFromFlag(o.optimizer);
    const options = o.options ? loadOptionsFile(o.options) : new Options();
    if (o.replicas !== undefined) options.replicationFactor(o.replicas);
    if (o.accumulation !== undefined) options.Training.gradientAccumulation(o.accumulation);
    if (o.deviceIterations !== undefined) options.deviceIterations(o.deviceIterations);
    if (o.timeout !== undefined) options.executableTimeout(o.timeout);
    const args = modelArgs(o['arg'] as string[] | undefined);
    const loaded = loadModel(model, { ...(o.batchSize !== undefined ? { batchSize: o.batchSize } : {}), ...(args ? { args } : {}), ...importPathsOf(o) });
    const g = o.loss ? withLoss(loaded, o.loss) : loaded;
    const opt = makeOptimizer(optType, o.lr !== undefined ? { lr: o.lr } : optType === 'SGD' ? { lr: 0.05 } : {});
    const { passes, timePasses } = passFlags(o);
    const backendName = (o.backend as string).toLowerCase();
    if (backendName !== 'ipu' && backendName !== 'reference') throw new UsageError(`--backend must be ipu or reference, got '${o.backend}'`);
    const trainer = trainingModel(g, options, opt, { passes, ...(backendName === 'reference' ? { backend: referenceBackend } : {}) });
    const target = backendName === 'reference' ? 'the reference interpreter' : findToolchain().kind === 'sdk' ? 'the IPU (Poplar SDK)' : 'the emulated IPU (poplar-host)';

    const micro = g.inputs()[0]?.result.type.shape[0] ?? 1;
    const inputGroups = options.replication_factor / Math.max(1, options.input_group_size);
    const perRun = micro * options.device_iterations * inputGroups * options.Training.gradient_accumulation;
    if (perRun > o.samples) throw new UsageError(`one run needs ${perRun} samples but the data set has ${o.samples} (raise --samples)`);
    const data = new TeacherDataset(g, o.samples, classCount(g), o.seed);
    const rng = new Rng(o.seed, 11);
    let order: number[] = [];
    let cursor = 0;
    const nextIndices = (): number[] => {
      if (cursor + perRun > order.length) {
        // a new epoch: reshuffle (Fisher-Yates), dropping the incomplete tail
        order = Array.from({ length: o.samples }, (_, i) => i);
        for (let i = order.length - 1; i > 0; i--) {
          const j = rng.nextU32() % (i + 1);
          [order[i], order[j]] = [order[j]!, order[i]!];
        }
        cursor = 0;
      }
      const idx = order.slice(cursor, cursor + perRun);
      cursor += perRun;
      return idx;
    };

    process.stdout.write(`training ${g.name} (${g.parameters().length} parameters) with ${opt.type} on ${target}: ${o.steps} steps of ${perRun} samples\n`);
    const tc = performance.now();
    trainer.compile();
    process.stdout.write(`compiled in ${((performance.now() - tc) / 1000).toFixed(1)} s\n`);
    const t0 = performance.now();
    stderrReporter().report(trainer.warnings);
    if (timePasses) process.stderr.write(formatTimings(trainer.passTimings) + '\n');
    const bar = o.progress && process.stderr.isTTY ? new cliProgress.SingleBar({ format: 'train |{bar}| {value}/{total} steps | loss {loss}', hideCursor: true }, cliProgress.Presets.shades_classic) : undefined;
    bar?.start(o.steps, 0, { loss: '-' });
    const losses: number[] = [];
    const every = Math.max(1, Math.floor(o.steps / 10));
    let firstNonFinite: number | undefined;
    for (let s = 1; s <= o.steps; s++) {
      const out = trainer.run(data.batch(nextIndices()));
      const l = mean(out[trainer.lossOutput]!.toArray());
      losses.push(l);
      if (bar) bar.update(s, { loss: l.toFixed(4) });
      else if (s === 1 || s % every === 0 || s === o.steps) process.stdout.write(`step ${String(s).padStart(String(o.steps).length)}/${o.steps}  loss ${l.toFixed(4)}\n`);
      if (!Number.isFinite(l) && firstNonFinite === undefined) {
        firstNonFinite = s;
        bar?.stop();
        const hint = 'lower the learning rate (--lr), check the inputs, or use loss scaling with float16';
        if (o.stopOnNan) throw new DiagnosticError(error(`the loss is ${l} at step ${s}: training stopped (--stop-on-nan)`, undefined, [hint, ...(o.save ? [`${o.save} was not written`] : [])]));
        stderrReporter().report([warning(`the loss is ${l} at step ${s}; the weights are no longer finite from here on`, undefined, [hint, 'add --stop-on-nan to stop at the first such step'])]);
      }
    }
    bar?.stop();
    const k = Math.max(1, Math.floor(o.steps / 10));
    const first = mean(losses.slice(0, k));
    const last = mean(losses.slice(-k));
    process.stdout.write(`loss ${first.toFixed(4)} -> ${last.toFixed(4)} (mean of the first and last ${k} steps) in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
    if (o.save) {
      // streamed tensor by tensor: no single string or buffer holds the whole file
      saveWeights(o.save, trainer.stateDict(), { metadata: { producer: 'tilegraph', model: g.name, steps: String(o.steps), optimizer: opt.type } });
      process.stdout.write(`weights written to ${o.save}\n`);
    }
  });
}
