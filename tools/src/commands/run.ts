import * as fs from 'node:fs';
import { Command } from 'commander';
import { DType, DiagnosticError, Graph, Rng, Tensor, error, formatShape, formatType, isFloat, shapesEqual } from '@tilegraph/ir';
import { inferenceModel, loadWeights, runGraph } from '@tilegraph/runtime';
import { Options } from '@tilegraph/frontend';
import { UsageError, stderrReporter } from '../diagnostics.js';
import { checkInputFile } from '../files.js';
import { IMPORT_PATH_FLAG, importPathsOf, naturalInt, positiveInt } from '../flags.js';
import { loadModel } from '../load.js';
import { formatTensor } from '../format.js';

/** Synthetic inputs: standard normal floats, integers in [0, intHigh), alternating bools. */
export function syntheticInputs(g: Graph, seed: number, intHigh: number): Record<string, Tensor> {
  const rng = new Rng(seed, 1);
  const feeds: Record<string, Tensor> = {};
  for (const op of g.inputs()) {
    const { dtype, shape } = op.result.type;
    const t = Tensor.zeros(dtype, shape);
    const vals = new Array<number>(t.size);
    for (let i = 0; i < t.size; i++) {
      vals[i] = isFloat(dtype) ? rng.normal() : dtype === 'bool' ? i % 2 : rng.nextU32() % intHigh;
    }
    feeds[op.attrs['name'] as string] = Tensor.from(dtype, shape, vals);
  }
  return feeds;
}

/** Reads `name=file.json` input values: a flat or nested JSON array of numbers. */
function readInput(g: Graph, spec: string): [string, Tensor] {
  const eq = spec.indexOf('=');
  if (eq < 0) throw new UsageError(`--input expects name=file.json, got '${spec}'`);
  const name = spec.slice(0, eq);
  const file = spec.slice(eq + 1);
  const op = g.inputs().find((o) => o.attrs['name'] === name);
  if (!op) throw new UsageError(`the model has no input '${name}' (inputs: ${g.inputs().map((o) => o.attrs['name']).join(', ')})`);
  let data: unknown;
  try {
    data = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new UsageError(`cannot read ${file}: ${(e as Error).message}`);
  }
  const flat = (Array.isArray(data) ? data : [data]).flat(Infinity) as unknown[];
  const { dtype, shape } = op.result.type;
  if (flat.some((x) => typeof x !== 'number' && typeof x !== 'boolean')) throw new UsageError(`${file}: values must be numbers`);
  const t = Tensor.zeros(dtype as DType, shape);
  if (flat.length !== t.size) throw new UsageError(`${file}: ${flat.length} values for input '${name}' of type ${formatType(op.result.type)} (${t.size} values)`);
  return [name, Tensor.from(dtype, shape, flat as number[])];
}

/**
 * Weights from a file (`train --save`) checked against the model's parameters: every parameter
 * given, with its type, and no other name, so weights of another model are not half-applied.
 */
export function readWeightsFor(g: Graph, file: string): Record<string, Tensor> {
  const weights = loadWeights(file);
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

export function registerRun(program: Command): void {
  program
    .command('run')
    .description('run a model once through the reference interpreter and print its outputs')
    .argument('<model>', 'model file (.tg, .onnx or .tgir)')
    .option('--input <name=file.json...>', 'input values (others are synthetic)')
    .option('--seed <n>', 'seed of synthetic inputs and random ops', naturalInt, 0)
    .option('--int-high <n>', 'synthetic integer inputs are drawn from [0, n)', positiveInt, 2)
    .option('--batch-size <n>', 'size of symbolic batch dimensions (ONNX)', positiveInt)
    .option(...IMPORT_PATH_FLAG)
    .option('--backend <target>', 'reference (the IR interpreter) or ipu (compiled: the SDK if popc is on PATH, else the emulation)', 'reference')
    .option('--weights <file>', 'parameter values from a weights file (train --save: .safetensors or .json) instead of the initializers')
    .action((model: string, o: { input?: string[]; seed: number; intHigh: number; batchSize?: number; backend: string; weights?: string }) => {
      if (o.backend !== 'reference' && o.backend !== 'ipu') throw new UsageError(`--backend must be reference or ipu, got '${o.backend}'`);
      if (!Number.isInteger(o.seed)) throw new UsageError('--seed must be an integer');
      if (!Number.isInteger(o.intHigh) || o.intHigh < 1) throw new UsageError('--int-high must be a positive integer');
      if (o.weights) checkInputFile(o.weights, 'weights file');
      const g = loadModel(model, { ...(o.batchSize !== undefined ? { batchSize: o.batchSize } : {}), ...importPathsOf(o as Record<string, unknown>) });
      const feeds = syntheticInputs(g, o.seed, o.intHigh);
      for (const spec of o.input ?? []) {
        const [k, v] = readInput(g, spec);
        feeds[k] = v;
      }
      const weights = o.weights ? readWeightsFor(g, o.weights) : undefined;
      const t0 = performance.now();
      const session = o.backend === 'ipu' ? inferenceModel(g, new Options().randomSeed(o.seed)) : undefined;
      if (session && weights) session.loadStateDict(weights);
      const outputs = session ? session.run(feeds) : runGraph(g, feeds, { seed: o.seed, ...(weights ? { parameters: weights } : {}) }).outputs;
      if (session) stderrReporter().report(session.warnings);
      const ms = performance.now() - t0;
      const where = o.backend === 'ipu' ? 'compiled for the IPU target, including the build' : 'reference interpreter';
      process.stdout.write(`${g.name}: ${g.numOps} ops, ${g.parameters().length} parameters${o.weights ? ` from ${o.weights}` : ''}, ran in ${ms.toFixed(1)} ms (${where})\n`);
      for (const [name, t] of Object.entries(outputs)) process.stdout.write(`${name} = ${formatTensor(t)}\n`);
    });
}
