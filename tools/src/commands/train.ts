import * as fs from 'node:fs';
import * as path from 'node:path';
import { Command } from 'commander';
import { Options } from '@tilegraph/frontend';
import { DiagnosticError, Graph, Tensor, drawsRandom, error, warning } from '@tilegraph/ir';
import { formatTimings, makeOptimizer } from '@tilegraph/passes';
import { DataLoader, Dataset, findToolchain, progressBar, loadWeights, referenceBackend, saveWeights, trainingModel, weightsFormatOf } from '@tilegraph/runtime';
import { UsageError, isDiagnosticError, stderrReporter } from '../diagnostics.js';
import { checkInputFile, checkOutputFile } from '../files.js';
import { loadModel } from '../load.js';
import { modelFlagsOf, registerModelFlags } from '../modelflags.js';
import { LOSS_FLAG, withLoss } from '../loss.js';
import { withLossHint } from './step.js';
import { emitEvent, jsonNumber } from '../json.js';
import { checkWeightsFit } from './run.js';
import { EXPLAIN_CACHE_FLAG, cacheJson, cacheNote, finiteNumber, naturalInt, positiveInt, positiveNumber } from '../flags.js';
import { OPTIMIZER_FLAGS, loadOptionsFile, optimizerFromFlag } from '../options.js';
import { passFlags, registerPassFlags } from './passflags.js';
import { checkCacheFolderUpFront } from '../cachedir.js';
import { InputSpec } from '../data/arrays.js';
import { loadData } from '../data/dataset.js';
import { TeacherDataset } from '../data/synthetic.js';
import { EvalResult, Evaluator } from '../data/evaluate.js';
import { CHECKPOINT_FORMAT, CheckpointState, findCheckpoint, readCheckpoint, writeCheckpoint } from '../data/checkpoint.js';
import { checkOutputDir } from '../data/outputs.js';
import { onnxInitializers, writeOnnxWithWeights } from '../data/onnx.js';

export { TeacherDataset } from '../data/synthetic.js';

/** Classes of the task: the class dimension of an output named logits, else 2. */
function classCount(g: Graph): number {
  const logits = g.outputs.find((o) => o.name === 'logits');
  const s = logits?.value.type.shape;
  return s && s.length >= 2 ? s[1]! : 2;
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

function mean(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0) / Math.max(xs.length, 1);
}

interface TrainFlags {
  steps?: number;
  epochs?: number;
  optimizer: string;
  lr?: number;
  options?: string;
  batchSize?: number;
  samples: number;
  seed: number;
  intHigh: number;
  replicas?: number;
  accumulation?: number;
  deviceIterations?: number;
  save?: string;
  backend: string;
  loss?: string;
  progress: boolean;
  stopOnNan?: boolean;
  timeout?: number;
  data?: string;
  evalData?: string;
  shuffle?: boolean;
  checkpointDir?: string;
  checkpointEvery?: number;
  resume?: string;
  load?: string;
  profile?: string;
}

/** Checks `--load` before any work: a weights file (a regular one, of a known format) or a checkpoint folder. */
function checkLoadPath(file: string): void {
  let st: fs.Stats | undefined;
  try {
    st = fs.statSync(file);
  } catch {
    st = undefined;
  }
  if (st?.isDirectory()) {
    const w = path.join(file, 'weights.safetensors');
    if (!fs.existsSync(w)) throw new UsageError(`--load ${file} is a folder without weights.safetensors (give a weights file or a checkpoint folder)`);
    checkInputFile(w, 'weights file (--load)');
    return;
  }
  checkInputFile(file, 'weights file');
  if (!file.toLowerCase().endsWith('.onnx') && !weightsFormatOf(file)) throw new UsageError(`--load ${file}: give a .safetensors, .json or .onnx file, or a checkpoint folder`);
}

/** `--load`: weights from safetensors/JSON, a checkpoint folder, or an ONNX file's float initializers. */
function loadInitialWeights(g: Graph, file: string): Record<string, Tensor> {
  checkLoadPath(file);
  if (fs.statSync(file).isDirectory()) {
    const w = path.join(file, 'weights.safetensors');
    return checkWeightsFit(g, w, loadWeights(w));
  }
  if (file.toLowerCase().endsWith('.onnx')) return checkWeightsFit(g, file, onnxInitializers(file));
  return checkWeightsFit(g, file, loadWeights(file));
}

function formatEval(r: EvalResult): string {
  const parts = [...(r.loss !== undefined ? [`eval loss ${r.loss.toFixed(4)}`] : []), ...(r.accuracy !== undefined ? [`accuracy ${r.accuracy.toFixed(4)}`] : [])];
  return `${parts.join(', ') || 'evaluated'} (${r.samples} samples${r.leftOut ? `; the last ${r.leftOut} do not fill a micro-batch` : ''})`;
}

export function registerTrain(program: Command): void {
  const cmd = program
    .command('train')
    .description('train a model on data (--data) or on a synthetic classification task, and print the loss')
    .argument('<model>', 'model file (.tg, .onnx or .tgir) with a loss')
    .option('--data <file>', "training data: an .npz (or .npy) file, a folder of .npy files, or a .js module exporting a dataset; arrays named like the model's inputs, first dimension = samples (default: a synthetic task)")
    .option('--eval-data <file>', 'data evaluated after each epoch (and at the end): mean loss, and accuracy (see below)')
    .option('--steps <n>', 'optimizer steps in all, a resumed training included (default 50)', positiveInt)
    .option('--epochs <n>', 'passes over the data in all, instead of --steps', positiveInt)
    .option('--shuffle', 'visit the samples in a new random order each epoch, from --seed (the default)')
    .option('--no-shuffle', 'visit the samples in file order')
    .option('--optimizer <name>', `one of ${Object.keys(OPTIMIZER_FLAGS).join(', ')}`, 'sgd')
    .option('--lr <x>', 'learning rate', finiteNumber)
    .option('--options <file>', 'options: JSON, or PopTorch-style setters one a line')
    .option('--samples <n>', 'size of the synthetic data set', positiveInt, 1024)
    .option('--seed <n>', 'seed of the synthetic data and of shuffling', naturalInt, 0)
    .option('--int-high <n>', 'synthetic integer inputs that are neither labels nor read by an embedding are drawn from [0, n)', positiveInt, 2)
    .option('--replicas <n>', 'replicationFactor', positiveInt)
    .option('--accumulation <n>', 'Training.gradientAccumulation', positiveInt)
    .option('--device-iterations <n>', 'deviceIterations', positiveInt)
    .option('--backend <target>', 'where the step runs: ipu (compiled: the Poplar SDK if popc is on PATH, else the poplar-host emulation) or reference (the IR interpreter)', 'ipu')
    .option(...LOSS_FLAG)
    .option('--load <file>', 'start from saved weights: .safetensors or .json (train --save), a checkpoint folder, or an ONNX file (its initializers)')
    .option('--save <file>', 'write the trained weights: .safetensors, .json, or .onnx (the ONNX model with its initializers replaced; ONNX models only)')
    .option('--checkpoint-dir <dir>', 'write checkpoints here (a folder step-N each: weights, optimizer state, counters), at the end and every --checkpoint-every steps')
    .option('--checkpoint-every <n>', 'steps between checkpoints', positiveInt)
    .option('--resume <dir>', 'continue from a checkpoint (a step-N folder, or the newest in a --checkpoint-dir) exactly where it stopped')
    .option('--stop-on-nan', 'stop at the first step whose loss is NaN or infinite (exit code 1, nothing saved)')
    .option('--profile <dir>', 'profile the compile and every step into DIR/<model name> (Options.enableProfiling); tilegraph report --profile DIR --html FILE shows it')
    .option('--timeout <seconds>', 'longest wait for one step of the compiled executable before it is stopped (default 600)', positiveNumber)
    .option(...EXPLAIN_CACHE_FLAG)
    .option('--no-progress', 'no progress bars (the build\'s or the training\'s)')
    .option('--json', 'print JSON Lines on stdout: one event a line (start, compile, profile, step, epoch, eval, checkpoint, save, warning, error, end)')
    .addHelpText(
      'after',
      [
        '',
        'Batches: each step reads micro-batch × deviceIterations × replicas × accumulation samples; an epoch',
        'drops the samples that do not fill a step. Printed: a line per step when stdout is not a terminal',
        '(step, loss, samples/s), else every tenth; a progress bar on a terminal\'s stderr.',
        'Evaluation (--eval-data): the mean loss over whole micro-batches, and the accuracy when an integer',
        'label input feeds a cross_entropy or nll_loss whose class scores are a model output (through',
        'log_softmax or softmax): the arg-max over dim 1 of those scores compared with the label, ignore_index',
        'labels left out.',
        'Resuming (--resume) restores weights, optimizer state, the position in the data and the random-number',
        'state, so a resumed training goes on bit for bit as an uninterrupted one would (dropout included).',
      ].join('\n'),
    );
  registerModelFlags(cmd, 'micro-batch size: symbolic batch dimensions (ONNX) or the `batch` parameter (.tg)');
  registerPassFlags(cmd);
  cmd.action(async function (this: Command, model: string, o: TrainFlags & Record<string, unknown>) {
    const fromCli = (k: string) => this.getOptionValueSource(k) === 'cli';
    const json = !!o['json'];
    // each line a person reads has an event a program reads (--json)
    // under mpirun (Options.Distributed, from OpenMPI's environment or the options file) only
    // process 0 speaks and writes files; set once the options are read
    let speaks = true;
    const say = (line: string, event: Record<string, unknown>) => {
      if (!speaks) return;
      if (json) emitEvent(event);
      else process.stdout.write(line + '\n');
    };
    if (o.steps !== undefined && o.epochs !== undefined) throw new UsageError('give --steps or --epochs, not both');
    if (o.data && fromCli('samples')) throw new UsageError('--samples sizes the synthetic data set; with --data the data set is the file');
    if (o.checkpointEvery !== undefined && !o.checkpointDir) throw new UsageError('--checkpoint-every needs --checkpoint-dir');
    if (o.load && o.resume) throw new UsageError('give --load (start from weights) or --resume (continue a training), not both');
    const configFiles = [model, ...(o.options ? [o.options] : [])];
    // the weights are written after training: check where before it starts
    if (o.save) {
      checkOutputFile(o.save, '--save', configFiles);
      const onnx = o.save.toLowerCase().endsWith('.onnx');
      if (!onnx && !weightsFormatOf(o.save)) throw new UsageError(`--save ${o.save}: name the file .safetensors (safetensors, for PyTorch and NumPy too) or .json (JSON), or .onnx for an ONNX model`);
      if (onnx && !model.toLowerCase().endsWith('.onnx')) throw new UsageError(`--save ${o.save}: an ONNX file is written from an ONNX model, and ${model} is not one; save .safetensors or .json`);
    }
    if (o.checkpointDir) checkOutputDir(o.checkpointDir, '--checkpoint-dir');
    if (o.profile !== undefined) {
      checkOutputDir(o.profile, '--profile');
      if (String(o.backend).toLowerCase() === 'reference') throw new UsageError('--profile measures the compiled step; the reference interpreter (--backend reference) measures nothing');
    }
    const resumeDir = o.resume ? findCheckpoint(o.resume) : undefined;
    if (o.load) checkLoadPath(o.load);
    const optType = optimizerFromFlag(o.optimizer);
    // flag values the optimizer refuses (--lr -1) are command-line errors, said before any work
    let opt: ReturnType<typeof makeOptimizer>;
    try {
      opt = makeOptimizer(optType, o.lr !== undefined ? { lr: o.lr } : optType === 'SGD' ? { lr: 0.05 } : {});
    } catch (e) {
      if (isDiagnosticError(e)) throw new UsageError(`--lr ${o.lr}: ${e.diagnostics.map((d) => d.message).join('; ')}`);
      throw e;
    }
    const { passes, timePasses } = passFlags(o);
    const options = o.options ? loadOptionsFile(o.options) : new Options();
    speaks = options.Distributed.processId === 0;
    if (o.replicas !== undefined) options.replicationFactor(o.replicas);
    if (o.accumulation !== undefined) options.Training.gradientAccumulation(o.accumulation);
    if (o.deviceIterations !== undefined) options.deviceIterations(o.deviceIterations);
    if (o.timeout !== undefined) options.executableTimeout(o.timeout);
    if (!o.progress) options.showCompilationProgressBar(false);
    if (o.profile !== undefined) options.enableProfiling(o.profile);
    // the compiled step is built into the executable cache: a folder that cannot be used is said now
    if (String(o.backend).toLowerCase() === 'ipu') checkCacheFolderUpFront(options.executable_cache_dir);
    const loaded = loadModel(model, modelFlagsOf(o));
    const g = o.loss ? withLoss(loaded, o.loss) : loaded;
    const backendName = (o.backend as string).toLowerCase();
    if (backendName !== 'ipu' && backendName !== 'reference') throw new UsageError(`--backend must be ipu or reference, got '${o.backend}'`);
    const backend = backendName === 'reference' ? referenceBackend : undefined;
    const trainer = trainingModel(g, options, opt, { passes, ...(backend ? { backend } : {}) });
    const P = options.Distributed.numProcesses;
    const where = backendName === 'reference' ? 'the reference interpreter' : findToolchain().kind === 'sdk' ? 'the IPU (Poplar SDK)' : 'the emulated IPU (poplar-host)';
    const target = P > 1 ? `${where}, ${P} processes × ${options.replication_factor} replicas` : where;

    const inputs: InputSpec[] = g.inputs().map((op) => ({ name: op.attrs['name'] as string, type: op.result.type }));
    const micro = inputs.find((i) => i.type.shape.length > 0)?.type.shape[0] ?? 1;
    const shuffle = o.shuffle ?? true;
    let dataset: Dataset;
    let dataName: string;
    if (o.data) {
      const d = await loadData(o.data, '--data', inputs);
      dataset = d.dataset;
      dataName = d.describe;
    } else {
      const inputGroups = options.replication_factor / Math.max(1, options.input_group_size);
      const perRun = micro * options.device_iterations * inputGroups * options.Training.gradient_accumulation;
      const P = options.Distributed.numProcesses;
      if (perRun * P > o.samples) throw new UsageError(`one run needs ${perRun} samples${P > 1 ? ` on each of ${P} processes` : ''} but the data set has ${o.samples} (raise --samples)`);
      dataset = new TeacherDataset(g, o.samples, classCount(g), o.seed, o.intHigh);
      dataName = `a synthetic task (${o.samples} samples)`;
    }
    const loader = new DataLoader(options, dataset, { batchSize: micro, shuffle, seed: o.seed, dropLast: true });
    const evalData = o.evalData ? await loadData(o.evalData, '--eval-data', inputs) : undefined;
    const runsPerEpoch = loader.length;
    const C = loader.combinedBatchSize;
    const totalSteps = o.epochs !== undefined ? o.epochs * runsPerEpoch : (o.steps ?? 50);

    say(`training ${g.name} (${g.parameters().length} parameters) with ${opt.type} on ${target}: ${totalSteps} steps of ${C} samples, from ${dataName}, ${runsPerEpoch} steps an epoch${shuffle ? ', shuffled' : ''}`, {
      event: 'start',
      model: g.name,
      file: model,
      parameters: g.parameters().length,
      optimizer: opt.type,
      backend: backendName,
      target,
      steps: totalSteps,
      samples_per_step: C,
      data: dataName,
      steps_per_epoch: runsPerEpoch,
      shuffle,
    });
    const tc = performance.now();
    withLossHint(() => trainer.compile());
    const compileSecs = (performance.now() - tc) / 1000;
    const cache = trainer.executableCache;
    say(`compiled in ${compileSecs.toFixed(1)} s${cacheNote(cache, !!o['explainCache'])}`, { event: 'compile', seconds: round3(compileSecs), ...cacheJson(cache) });
    stderrReporter().report(trainer.warnings);
    if (timePasses && !json) process.stderr.write(formatTimings(trainer.passTimings) + '\n');
    if (trainer.profileDir) say(`profiling into ${trainer.profileDir} (compile.json now, profile.json after every step; tilegraph report ${model} --profile ${o.profile ?? trainer.profileDir} --html FILE shows it)`, { event: 'profile', dir: trainer.profileDir });

    let step = 0;
    let epoch = 0;
    let run = 0;
    if (o.load) {
      trainer.loadStateDict(loadInitialWeights(g, o.load));
      say(`weights loaded from ${o.load}`, { event: 'load', file: o.load });
    }
    if (resumeDir) {
      const ck = readCheckpoint(resumeDir);
      const s = ck.state;
      if (s.model !== g.name) throw new DiagnosticError(error(`${resumeDir}: the checkpoint is of model '${s.model}', not '${g.name}'`));
      trainer.loadStateDict(checkWeightsFit(g, path.join(resumeDir, 'weights.safetensors'), ck.weights));
      trainer.loadOptimizerStateDict(ck.optimizer);
      if (s.rng) trainer.rngState = s.rng;
      const changed = [
        ...(s.combinedBatchSize !== C ? [`samples a step: ${s.combinedBatchSize} then, ${C} now`] : []),
        ...(s.dataLength !== dataset.length ? [`samples in the data: ${s.dataLength} then, ${dataset.length} now`] : []),
        ...(s.shuffle !== shuffle || (shuffle && s.seed !== o.seed) ? [`data order: ${s.shuffle ? `shuffled with seed ${s.seed}` : 'file order'} then, ${shuffle ? `shuffled with seed ${o.seed}` : 'file order'} now`] : []),
        ...(s.optimizer.type !== opt.type ? [`optimizer: ${s.optimizer.type} then, ${opt.type} now`] : []),
      ];
      if (changed.length) stderrReporter().report([warning(`resuming ${resumeDir} with other settings than the training that wrote it: it does not continue exactly`, undefined, changed)]);
      if (!s.rng && [...trainer.compiledModule().graphs.values()].some(drawsRandom)) {
        stderrReporter().report([warning(`${resumeDir} does not hold the random-number state (an older checkpoint): random ops (dropout, ...) restart from the seed, so the resumed training is not bit-identical to an uninterrupted one`)]);
      }
      step = s.step;
      epoch = s.epoch;
      run = s.runInEpoch;
      if (run >= runsPerEpoch) {
        epoch++;
        run = 0;
      }
      say(`resumed from ${resumeDir} at step ${step} (epoch ${epoch + 1}, step ${run + 1} of it)`, { event: 'resume', dir: resumeDir, step, epoch: epoch + 1 });
    }

    const evaluator = evalData ? new Evaluator(g, evalData.dataset, micro, trainer.lossOutput, () => {
      // each process evaluates the whole eval set on its own
      const eo = new Options().executableTimeout(options.executable_timeout);
      eo.Distributed.disable();
      return eo;
    }, backend) : undefined;
    const checkpoint = (): void => {
      const state: CheckpointState = {
        format: CHECKPOINT_FORMAT,
        model: g.name,
        step,
        epoch,
        runInEpoch: run,
        seed: o.seed,
        shuffle,
        combinedBatchSize: C,
        dataLength: dataset.length,
        data: dataName,
        optimizer: { type: opt.type, hyper: { ...opt.hyper } },
        backend: backendName,
        rng: trainer.rngState,
      };
      // every process reads the state (reading other processes' replicas is a collective); process 0 writes
      const weights = trainer.stateDict();
      const optimizerState = trainer.optimizerStateDict();
      if (speaks) {
        const dir = writeCheckpoint(o.checkpointDir!, state, weights, optimizerState);
        say(`checkpoint written to ${dir}`, { event: 'checkpoint', dir, step });
      }
    };

    const t0 = performance.now();
    const remaining = Math.max(0, totalSteps - step);
    if (remaining === 0) say(`nothing to do: ${step} steps are done already (raise --steps or --epochs to train on)`, { event: 'note', message: `nothing to do: ${step} steps are done already` });
    const bar = remaining > 0 && o.progress && speaks && process.stderr.isTTY ? progressBar('training', totalSteps, 'steps', { start: step, label: 'loss -' }) : undefined;
    // piped output (train ... | tee log) gets every step; a terminal every tenth, unless the bar shows them
    const everyStep = json || !process.stdout.isTTY;
    const every = Math.max(1, Math.floor(totalSteps / 10));
    const width = String(totalSteps).length;
    const losses: number[] = [];
    let epochLosses: number[] = [];
    let firstNonFinite: number | undefined;
    let indices = loader.indices(epoch);
    let lastEval = -1;
    const evaluate = (label: string, atEpoch?: number) => {
      if (!evaluator) return;
      const r = evaluator.evaluate(trainer.stateDict());
      lastEval = step;
      say(`${label}: ${formatEval(r)}`, {
        event: 'eval',
        step,
        ...(atEpoch !== undefined ? { epoch: atEpoch } : {}),
        ...(r.loss !== undefined ? { loss: jsonNumber(r.loss) } : {}),
        ...(r.accuracy !== undefined ? { accuracy: r.accuracy } : {}),
        samples: r.samples,
      });
    };
    while (step < totalSteps) {
      const batch = loader.batch(epoch, run, indices);
      const ts = performance.now();
      const out = trainer.run(batch);
      const secs = (performance.now() - ts) / 1000;
      step++;
      run++;
      const l = mean(out[trainer.lossOutput]!.toArray());
      losses.push(l);
      epochLosses.push(l);
      if (bar) bar.update(step, `loss ${l.toFixed(4)}`);
      if (everyStep || (!bar && (step === 1 || step % every === 0 || step === totalSteps))) {
        const rate = C / Math.max(secs, 1e-9);
        say(`step ${String(step).padStart(width)}/${totalSteps}  loss ${l.toFixed(4)}  ${rate.toFixed(1)} samples/s`, { event: 'step', step, steps: totalSteps, epoch: epoch + 1, loss: jsonNumber(l), samples_per_s: round3(rate) });
      }
      if (!Number.isFinite(l) && firstNonFinite === undefined) {
        firstNonFinite = step;
        bar?.stop();
        const hint = 'lower the learning rate (--lr), check the inputs, or use loss scaling with float16';
        if (o.stopOnNan) throw new DiagnosticError(error(`the loss is ${l} at step ${step}: training stopped (--stop-on-nan)`, undefined, [hint, ...(o.save ? [`${o.save} was not written`] : [])]));
        stderrReporter().report([warning(`the loss is ${l} at step ${step}; the weights are no longer finite from here on`, undefined, [hint, 'add --stop-on-nan to stop at the first such step'])]);
      }
      if (run === runsPerEpoch) {
        const done = epoch + 1;
        say(`epoch ${done}${o.epochs !== undefined ? `/${o.epochs}` : ''}: train loss ${mean(epochLosses).toFixed(4)} (mean of ${epochLosses.length} steps)`, { event: 'epoch', epoch: done, loss: jsonNumber(mean(epochLosses)), steps: epochLosses.length });
        evaluate(`epoch ${done}`, done);
        epoch++;
        run = 0;
        epochLosses = [];
        indices = loader.indices(epoch);
      }
      if (o.checkpointDir && ((o.checkpointEvery !== undefined && step % o.checkpointEvery === 0) || step === totalSteps)) checkpoint();
    }
    bar?.stop();
    if (lastEval !== step && remaining > 0) evaluate('end');
    const trainSecs = (performance.now() - t0) / 1000;
    const k = Math.max(1, Math.floor(losses.length / 10));
    if (losses.length && !json && speaks) {
      process.stdout.write(`loss ${mean(losses.slice(0, k)).toFixed(4)} -> ${mean(losses.slice(-k)).toFixed(4)} (mean of the first and last ${k} steps) in ${trainSecs.toFixed(1)} s\n`);
    }
    if (o.save) {
      const weights = trainer.stateDict();
      if (speaks) {
        if (o.save.toLowerCase().endsWith('.onnx')) writeOnnxWithWeights(model, o.save, weights);
      // streamed tensor by tensor: no single string or buffer holds the whole file
      else saveWeights(o.save, weights, { metadata: { producer: 'tilegraph', model: g.name, steps: String(step), optimizer: opt.type } });
        say(`weights written to ${o.save}`, { event: 'save', file: o.save });
      }
    }
    // the executable quits (under mpirun it leaves MPI together with the other processes)
    trainer.dispose();
    if (json && speaks) {
      emitEvent({
        event: 'end',
        ok: true,
        steps: step,
        trained_steps: losses.length,
        ...(losses.length ? { first_loss: jsonNumber(mean(losses.slice(0, k))), last_loss: jsonNumber(mean(losses.slice(-k))), averaged_steps: k } : {}),
        seconds: round3(trainSecs),
      });
    }
  });
}
