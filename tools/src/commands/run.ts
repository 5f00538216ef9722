import * as path from 'node:path';
import { Command } from 'commander';
import { DType, DiagnosticError, Graph, Rng, Tensor, TensorType, error, formatShape, formatType, isFloat, numElements, shapesEqual } from '@tilegraph/ir';
import { combine, findToolchain, inferenceModel, loadExecutable, loadWeights, runGraph, splitBatch } from '@tilegraph/runtime';
import { Options } from '@tilegraph/frontend';
import { UsageError, isDiagnosticError, stderrReporter } from '../diagnostics.js';
import { checkInputFile, checkOutputFile } from '../files.js';
import { checkCacheFolderUpFront } from '../cachedir.js';
import { EXPLAIN_CACHE_FLAG, cacheJson, cacheNote, naturalInt, positiveInt } from '../flags.js';
import { loadModel } from '../load.js';
import { emitDocument } from '../json.js';
import { modelFlagsOf, refuseModelFlagsForExecutable, registerModelFlags } from '../modelflags.js';
import { formatTensor } from '../format.js';
import { InputSpec, LoadedArray, listInputs, readArrays, toInput } from '../data/arrays.js';
import { checkOutputDir, describeOutputs, outputsJson, writeNpyFolder, writeNpz } from '../data/outputs.js';

/** Synthetic values of one input: standard normal floats, integers in [0, intHigh), alternating bools. */
function syntheticTensor(rng: Rng, dtype: DType, shape: readonly number[], intHigh: number): Tensor {
  const n = numElements(shape);
  const vals = new Array<number>(n);
  for (let i = 0; i < n; i++) vals[i] = isFloat(dtype) ? rng.normal() : dtype === 'bool' ? i % 2 : rng.nextU32() % intHigh;
  return Tensor.from(dtype, shape, vals);
}

/** Synthetic inputs: standard normal floats, integers in [0, intHigh), alternating bools. */
export function syntheticInputs(g: Graph, seed: number, intHigh: number): Record<string, Tensor> {
  return syntheticFor(g.inputs().map((op) => ({ name: op.attrs['name'] as string, type: op.result.type })), seed, intHigh);
}

function syntheticFor(inputs: readonly InputSpec[], seed: number, intHigh: number): Record<string, Tensor> {
  const rng = new Rng(seed, 1);
  return Object.fromEntries(inputs.map((i) => [i.name, syntheticTensor(rng, i.type.dtype, i.type.shape, intHigh)]));
}

/**
 * Weights from a file (`train --save`) checked against the model's parameters: every parameter
 * given, with its type, and no other name, so weights of another model are not half-applied.
 */
export function readWeightsFor(g: Graph, file: string): Record<string, Tensor> {
  return checkWeightsFit(g, file, loadWeights(file));
}

/** Checks weights (read from `file`) against the model's parameters; see readWeightsFor. */
export function checkWeightsFit(g: Graph, file: string, weights: Record<string, Tensor>): Record<string, Tensor> {
  const params = new Map(g.parameters().map((op) => [op.attrs['name'] as string, op.result.type]));
  const unknown = Object.keys(weights).filter((k) => !params.has(k));
  const missing = [...params.keys()].filter((k) => !Object.hasOwn(weights, k));
  const wrong = Object.entries(weights)
    .filter(([k, t]) => params.has(k) && (t.dtype !== params.get(k)!.dtype || !shapesEqual(t.shape, params.get(k)!.shape)))
    .map(([k, t]) => `'${k}' is ${formatType(params.get(k)!)} in the model but ${t.dtype}${formatShape(t.shape)} in the file`);
  if (unknown.length || missing.length || wrong.length) {
    const list = (xs: string[]) => xs.slice(0, 10).map((x) => `'${x}'`).join(', ') + (xs.length > 10 ? `, ... (${xs.length} in all)` : '');
    throw new DiagnosticError(
      error(`${file}: the weights do not fit the model '${g.name}'`, undefined, [
        ...(unknown.length ? [`not parameters of the model: ${list(unknown)}`] : []),
        ...(missing.length ? [`missing: ${list(missing)}`] : []),
        ...wrong.slice(0, 10),
        ...(wrong.length > 10 ? [`... and ${wrong.length - 10} more of another type`] : []),
      ]),
    );
  }
  return weights;
}

/** An input given on the command line: `--input name=file` or `--inputs file` (all its arrays). */
interface InputArg {
  readonly name?: string;
  readonly file: string;
}

function inputArgs(o: RunFlags): InputArg[] {
  const out: InputArg[] = o.inputs ? [{ file: o.inputs }] : [];
  for (const spec of o.input ?? []) {
    const eq = spec.indexOf('=');
    if (eq <= 0) throw new UsageError(`--input expects name=file (.npy, .npz or .json), got '${spec}'`);
    out.push({ name: spec.slice(0, eq), file: spec.slice(eq + 1) });
  }
  return out;
}

/** Every named input must be one of the model's: checked before any file is read. */
function checkNames(args: readonly InputArg[], inputs: readonly InputSpec[]): void {
  for (const a of args) {
    if (a.name !== undefined && !inputs.some((i) => i.name === a.name)) throw new UsageError(`the model has no input '${a.name}' (inputs: ${listInputs(inputs)})`);
  }
}

/** Reads the input files: arrays by input name (`--input` wins over `--inputs`), in the order given. */
function readInputArrays(args: readonly InputArg[]): Map<string, LoadedArray> {
  const out = new Map<string, LoadedArray>();
  for (const a of args) {
    const arrays = readArrays(a.file, 'input file');
    if (a.name === undefined) {
      for (const [k, v] of arrays) out.set(k, v);
      continue;
    }
    const one = arrays.size === 1 ? [...arrays.values()][0] : arrays.get(a.name);
    if (!one) throw new DiagnosticError(error(`${a.file}: holds ${arrays.size} arrays (${[...arrays.keys()].join(', ')}) and none named '${a.name}'`, undefined, ['give one array, or name the input like an array of the file']));
    out.delete(a.name);
    out.set(a.name, one);
  }
  return out;
}

/** Converts the arrays to the model's inputs; a name the model lacks is a diagnostic naming the file. */
function feedsFrom(arrays: ReadonlyMap<string, LoadedArray>, inputs: readonly InputSpec[]): Record<string, Tensor> {
  const feeds: Record<string, Tensor> = {};
  for (const [name, a] of arrays) {
    const spec = inputs.find((i) => i.name === name);
    if (!spec) throw new DiagnosticError(error(`${a.source}: the model has no input '${name}'`, undefined, [`the model's inputs: ${listInputs(inputs)}`]));
    feeds[name] = toInput(a, spec, inputs);
  }
  return feeds;
}

function specsOf(g: Graph): InputSpec[] {
  return g.inputs().map((op) => ({ name: op.attrs['name'] as string, type: op.result.type }));
}

/** The size of the first dimension of the first array (in the model's input order when known), if it tells one. */
function leadingDim(arrays: ReadonlyMap<string, LoadedArray>, inputs: readonly InputSpec[] | undefined): number | undefined {
  const ordered = inputs ? inputs.map((i) => arrays.get(i.name)).filter((a): a is LoadedArray => a !== undefined) : [...arrays.values()];
  const first = ordered[0] ?? [...arrays.values()][0];
  if (!first || first.tensor.shape.length === 0) return undefined;
  // a flat JSON list gives only a count
  const spec = inputs?.find((i) => arrays.get(i.name) === first);
  if (first.json && first.tensor.shape.length === 1 && spec && spec.type.shape.length > 1) return undefined;
  return first.tensor.shape[0];
}

const symbolicBatch = (e: unknown) => isDiagnosticError(e) && e.diagnostics.some((d) => d.message.includes('symbolic dimension'));
const noBatchParameter = (e: unknown) => isDiagnosticError(e) && e.diagnostics.some((d) => d.message.includes("no parameter 'batch'"));

interface RunFlags {
  input?: string[];
  inputs?: string;
  seed: number;
  intHigh: number;
  batchSize?: number;
  backend: string;
  weights?: string;
  output?: string;
  outputDir?: string;
  json?: boolean;
  progress: boolean;
  explainCache?: boolean;
  profile?: string;
}

interface RunResult {
  readonly name: string;
  readonly outputs: Record<string, Tensor>;
  readonly ms: number;
  readonly backend: string;
  readonly where: string;
  readonly cache?: { hit: boolean; reason?: string };
  readonly summary: string;
  readonly batchSize?: number;
  /** The model's profile folder (--profile). */
  readonly profileDir?: string;
}

/** Loads the model (batch size from the flag, else from the inputs when the model has a batch to set) and runs it. */
function runModel(model: string, o: RunFlags, args: readonly InputArg[]): RunResult {
  const flags = modelFlagsOf(o as unknown as Record<string, unknown>);
  const load = (batchSize: number | undefined) => loadModel(model, { ...flags, ...(batchSize !== undefined ? { batchSize } : {}) });
  let g: Graph | undefined;
  try {
    g = load(o.batchSize);
  } catch (e) {
    // an ONNX model with a symbolic batch: its size comes from the inputs
    if (!(o.batchSize === undefined && args.length && symbolicBatch(e))) throw e;
  }
  if (g) checkNames(args, specsOf(g));
  const arrays = readInputArrays(args);
  let inferred: number | undefined;
  if (o.batchSize === undefined && arrays.size) {
    const n = leadingDim(arrays, g ? specsOf(g) : undefined);
    if (!g) {
      if (n === undefined) throw new UsageError('give the batch size with --batch-size N (the inputs do not tell it)');
      g = load(n);
      inferred = n;
    } else if (n !== undefined && model.toLowerCase().endsWith('.tg')) {
      const first = specsOf(g).find((i) => arrays.has(i.name));
      if (first && first.type.shape.length > 0 && first.type.shape[0] !== n) {
        try {
          g = load(n);
          inferred = n;
        } catch (e) {
          // no `batch` parameter: the shapes are fixed, and the mismatch is reported below
          if (!noBatchParameter(e)) throw e;
        }
      }
    }
  }
  g ??= load(o.batchSize); // reports the missing batch size
  const inputs = specsOf(g);
  checkNames(args, inputs);
  const feeds = { ...syntheticFor(inputs, o.seed, o.intHigh), ...feedsFrom(arrays, inputs) };
  const weights = o.weights ? readWeightsFor(g, o.weights) : undefined;
  const t0 = performance.now();
  const opts = new Options().randomSeed(o.seed).showCompilationProgressBar(o.progress);
  if (o.profile !== undefined) opts.enableProfiling(o.profile);
  const session = o.backend === 'ipu' ? inferenceModel(g, opts) : undefined;
  if (session && weights) session.loadStateDict(weights);
  const outputs = session ? session.run(feeds) : runGraph(g, feeds, { seed: o.seed, ...(weights ? { parameters: weights } : {}) }).outputs;
  if (session) stderrReporter().report(session.warnings);
  const ms = performance.now() - t0;
  const where = o.backend === 'ipu' ? `compiled for the IPU target, including the build${cacheNote(session?.executableCache, !!o.explainCache)}` : 'reference interpreter';
  return {
    name: g.name,
    outputs,
    ms,
    backend: o.backend,
    where,
    ...(session?.executableCache ? { cache: session.executableCache } : {}),
    summary: `${g.name}: ${g.numOps} ops, ${g.parameters().length} parameters${o.weights ? ` from ${o.weights}` : ''}${inferred !== undefined ? `, batch size ${inferred} (from the inputs)` : ''}`,
    ...(inferred !== undefined ? { batchSize: inferred } : {}),
    ...(session?.profileDir ? { profileDir: session.profileDir } : {}),
  };
}

/** Runs an exported executable (`compile -o`): its inputs are whole runs, its outputs every micro-batch's. */
function runExecutable(file: string, o: RunFlags, args: readonly InputArg[]): RunResult {
  checkInputFile(file, 'executable');
  const exe = loadExecutable(file);
  const plan = exe.plan;
  const R = plan.replicationFactor;
  // the host sees a run's micro-batches of all replicas one after another along the first dimension
  const streams = plan.inputs.map((s) => {
    const count = s.perRun * R;
    const shape = count === 1 ? [...s.shape] : s.shape.length === 0 ? [count] : [count * s.shape[0]!, ...s.shape.slice(1)];
    return { name: s.name, count, part: { dtype: s.dtype, shape: [...s.shape] } as TensorType, type: { dtype: s.dtype, shape } as TensorType };
  });
  const inputs: InputSpec[] = streams.filter((s) => s.count > 0).map((s) => ({ name: s.name, type: s.type }));
  checkNames(args, inputs);
  const arrays = readInputArrays(args);
  const feeds = { ...syntheticFor(inputs, o.seed, o.intHigh), ...feedsFrom(arrays, inputs) };
  const weights = o.weights ? loadWeights(o.weights) : undefined;
  if (weights) checkExecutableWeights(o.weights!, weights, plan.state);
  const t0 = performance.now();
  const backend = exe.backend({ seed: o.seed });
  let produced: Record<string, Tensor[]>;
  try {
    for (const [k, t] of Object.entries(weights ?? {})) backend.write(k, t);
    const list: Record<string, Tensor[]> = {};
    for (const s of streams) if (s.count > 0) list[s.name] = s.count === 1 && shapesEqual(feeds[s.name]!.shape, s.part.shape) ? [feeds[s.name]!] : splitBatch(s.name, feeds[s.name]!, s.part, s.count);
    produced = backend.run(list);
  } finally {
    backend.dispose();
  }
  const ms = performance.now() - t0;
  const outputs: Record<string, Tensor> = {};
  for (const [k, v] of Object.entries(produced)) if (v.length) outputs[k] = combine(v);
  const tc = findToolchain();
  return {
    name: String(plan.module),
    outputs,
    ms,
    backend: 'executable',
    where: `exported executable for ${tc.kind === 'sdk' ? 'the IPU (Poplar SDK)' : 'the emulated IPU (poplar-host)'}`,
    summary: `${path.basename(file)}: executable of '${plan.module}', ${plan.state.filter((s) => s.role === 'weight').length} parameters${o.weights ? ` from ${o.weights}` : ''}`,
  };
}

/** Weights for an executable: its weights by name and type (a replica-sharded weight cannot be set whole). */
function checkExecutableWeights(file: string, weights: Record<string, Tensor>, state: readonly { name: string; dtype: DType; shape: readonly number[]; role: string; storage: string; shard?: unknown }[]): void {
  const notes: string[] = [];
  for (const [k, t] of Object.entries(weights)) {
    const s = state.find((x) => x.name === k && x.role === 'weight');
    if (!s) notes.push(`'${k}' is not a weight of the executable`);
    else if (s.shard || s.storage === 'transient') notes.push(`'${k}' is sharded across replicas in the executable and cannot be set from a file`);
    else if (s.dtype !== t.dtype || !shapesEqual(s.shape, t.shape)) notes.push(`'${k}' is ${formatType(s)} in the executable but ${t.dtype}${formatShape(t.shape)} in the file`);
  }
  const missing = state.filter((s) => s.role === 'weight' && !Object.hasOwn(weights, s.name)).map((s) => `'${s.name}'`);
  if (missing.length) notes.push(`missing: ${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', ...' : ''}`);
  if (notes.length) throw new DiagnosticError(error(`${file}: the weights do not fit the executable`, undefined, notes.slice(0, 12)));
}

export function registerRun(program: Command): void {
  const cmd = program
    .command('run')
    .description('run a model (.tg, .onnx, .tgir) or an exported executable (.tgx) once and print or write its outputs')
    .argument('<model>', 'model file (.tg, .onnx or .tgir) or executable (.tgx, from compile -o)')
    .option('--input <name=file...>', 'an input from a .npy, .npz (its one array, or the one of that name) or .json file (nested lists of numbers); inputs not given are synthetic')
    .option('--inputs <file.npz>', 'inputs by name from one .npz file (--input wins for the same name)')
    .option('-o, --output <file.npz>', 'write the outputs to an .npz file (numpy.load reads it)')
    .option('--output-dir <dir>', 'write each output to DIR/<name>.npy')
    .option('--json', 'print one JSON document: model, backend, time, outputs with dtype, shape and data (NaN and infinities as strings)')
    .option('--seed <n>', 'seed of synthetic inputs and random ops', naturalInt, 0)
    .option('--int-high <n>', 'synthetic integer inputs are drawn from [0, n)', positiveInt, 2)
    .option('--backend <target>', 'reference (the IR interpreter) or ipu (compiled: the SDK if popc is on PATH, else the emulation); a .tgx runs as built', 'reference')
    .option('--weights <file>', 'parameter values from a weights file (train --save: .safetensors or .json) instead of the initializers')
    .option('--no-progress', 'no progress bar while the model is built (--backend ipu)')
    .option('--profile <dir>', 'profile the compile and the run into DIR/inference (Options.enableProfiling; --backend ipu); tilegraph report --profile DIR --html FILE shows it')
    .option(...EXPLAIN_CACHE_FLAG);
  registerModelFlags(cmd, "size of the batch: symbolic batch dimensions (ONNX) or the `batch` parameter (.tg); default: the first input's first dimension");
  cmd.action(function (this: Command, model: string, o: RunFlags) {
      if (o.backend !== 'reference' && o.backend !== 'ipu') throw new UsageError(`--backend must be reference or ipu, got '${o.backend}'`);
      if (!Number.isInteger(o.seed)) throw new UsageError('--seed must be an integer');
      if (!Number.isInteger(o.intHigh) || o.intHigh < 1) throw new UsageError('--int-high must be a positive integer');
      const executable = model.toLowerCase().endsWith('.tgx');
      if (executable && this.getOptionValueSource('backend') === 'cli') throw new UsageError('--backend: an executable (.tgx) runs on the target it was built for');
      if (executable) refuseModelFlagsForExecutable(o as unknown as Record<string, unknown>, model);
      const args = inputArgs(o);
      // outputs are checked before any work
      const inputFiles = [model, ...args.map((a) => a.file), ...(o.weights ? [o.weights] : [])];
      if (o.output) {
        checkOutputFile(o.output, '-o', inputFiles);
        if (!o.output.toLowerCase().endsWith('.npz')) throw new UsageError(`-o ${o.output}: name the file .npz (for one .npy per output use --output-dir)`);
      }
      if (o.outputDir) checkOutputDir(o.outputDir, '--output-dir');
      if (o.profile !== undefined) {
        if (executable) throw new UsageError('--profile profiles a model file compiled here, not an exported executable (.tgx)');
        if (o.backend !== 'ipu') throw new UsageError('--profile measures the compiled model: add --backend ipu (the reference interpreter measures nothing)');
        checkOutputDir(o.profile, '--profile');
      }
      if (o.weights) checkInputFile(o.weights, 'weights file');
      // a compiled model is built (an executable unpacked) into the executable cache: checked before the work
      if (executable || o.backend === 'ipu') checkCacheFolderUpFront();
      const r = executable ? runExecutable(model, o, args) : runModel(model, o, args);
      const written: string[] = [];
      if (o.output) {
        writeNpz(o.output, r.outputs);
        written.push(o.output);
      }
      if (o.outputDir) {
        writeNpyFolder(o.outputDir, r.outputs);
        written.push(`${o.outputDir}${path.sep}`);
      }
      if (o.json) {
        const doc = {
          model: r.name,
          file: model,
          backend: r.backend,
          ...(r.batchSize !== undefined ? { batch_size: r.batchSize } : {}),
          time_ms: Math.round(r.ms * 1000) / 1000,
          ...cacheJson(r.cache),
          ...(r.profileDir ? { profile: r.profileDir } : {}),
          outputs: outputsJson(r.outputs),
        };
        emitDocument(doc);
        return;
      }
      process.stdout.write(`${r.summary}, ran in ${r.ms.toFixed(1)} ms (${r.where})\n`);
      if (r.profileDir) process.stdout.write(`profile written to ${r.profileDir} (tilegraph report ${model} --pipeline inference --profile ${o.profile ?? r.profileDir} --html FILE shows it)\n`);
      if (written.length) process.stdout.write(`outputs ${describeOutputs(r.outputs)} written to ${written.join(' and ')}\n`);
      else for (const [name, t] of Object.entries(r.outputs)) process.stdout.write(`${name} = ${formatTensor(t)}\n`);
    });
}
