import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Options, ReductionType } from '@tilegraph/frontend';
import { Graph, GraphBuilder, Tensor } from '@tilegraph/ir';
import { OptimizerSpec, OptimizerType, makeOptimizer } from '@tilegraph/passes';
import { BackendFactory } from '@tilegraph/runtime';
import { trainingModel } from './reference.js';

/** Access to the PyTorch fixtures in ../shared/oracles (see its README for the semantics). */

const here = path.dirname(fileURLToPath(import.meta.url));
export const ORACLES = path.resolve(here, '../../../shared/oracles');
export const oraclesPresent = fs.existsSync(path.join(ORACLES, 'index.json'));

export interface JsonTensor {
  shape: number[];
  dtype: string;
  data: number[];
}

export interface Trajectory {
  name: string;
  optimizer: { type: string; hyperparameters: Record<string, number | boolean | number[]> };
  micro_batch: number;
  gradient_accumulation: number;
  replication_factor: number;
  reduction: 'mean' | 'sum';
  max_grad_norm: number | null;
  steps: number;
  data: { x: JsonTensor; y: JsonTensor }[];
  per_step: { losses: number[]; grad_norm: number; params_after: Record<string, number[]> }[];
  noise_sensitive: Record<string, number[]>;
}

export interface Fixture {
  model: string;
  param_names: string[];
  params: Record<string, JsonTensor>;
  inputs: { x: JsonTensor; y: JsonTensor };
  forward: JsonTensor;
  loss: number;
  grads_f64: Record<string, JsonTensor>;
  trajectories: Trajectory[];
  onnx: { files: Record<string, string> };
}

export function loadFixture(model: string): Fixture {
  return JSON.parse(fs.readFileSync(path.join(ORACLES, `${model}.json`), 'utf8')) as Fixture;
}

export function tensorOf(t: JsonTensor, dtype: 'float32' | 'int32' = t.dtype === 'int64' ? 'int32' : 'float32'): Tensor {
  return Tensor.from(dtype, t.shape, t.data);
}

/** Concatenates micro-batches along the first dimension. */
export function concat(ts: readonly Tensor[]): Tensor {
  const first = ts[0]!;
  const data: number[] = [];
  for (const t of ts) data.push(...t.toArray());
  return Tensor.from(first.dtype, [first.shape[0]! * ts.length, ...first.shape.slice(1)], data);
}

/** Appends PyTorch's CrossEntropyLoss(mean) on logits against int labels `y`, marked as the loss. */
export function withCrossEntropy(g: Graph, logitsName = 'logits'): Graph {
  const out = g.outputs.find((o) => o.name === logitsName);
  if (!out) throw new Error(`no output ${logitsName}`);
  const b = new GraphBuilder(g);
  const y = b.input('y', 'int32', [out.value.type.shape[0]!]);
  const ce = b.op('cross_entropy', [out.value, y], { reduction: 'mean' });
  b.output('loss', b.op('identity_loss', [ce], { reduction: 'mean' }));
  return g;
}

/** The torch optimizer of a trajectory as an OptimizerSpec (torch names, PopTorch defaults otherwise). */
export function optimizerOf(t: Trajectory): OptimizerSpec {
  const h = { ...t.optimizer.hyperparameters };
  delete h['maximize'];
  const args: Record<string, number | boolean | readonly number[]> = { ...h };
  if (t.max_grad_norm !== null) args['max_grad_norm'] = t.max_grad_norm;
  return makeOptimizer(t.optimizer.type as OptimizerType, args);
}

export interface TrajectoryResult {
  losses: number[][];
  params: Record<string, Tensor>[];
}

/**
 * Replays a trajectory with trainingModel: one run per optimizer step, consuming the step's
 * R·A micro-batches in the fixture's order (accumulation step major, replica fastest), with all
 * losses returned (OutputMode.All).
 */
export function replay(graph: Graph, fix: Fixture, t: Trajectory, backend?: BackendFactory): TrajectoryResult {
  const opts = new Options();
  opts.replicationFactor(t.replication_factor);
  opts.Training.gradientAccumulation(t.gradient_accumulation);
  opts.Training.accumulationAndReplicationReductionType(t.reduction === 'sum' ? ReductionType.Sum : ReductionType.Mean);
  opts.outputMode(OutputModeAll());
  const model = trainingModel(graph, opts, optimizerOf(t), backend ? { backend } : {});
  // not strict: the fixtures list the trained parameters, not buffers such as BN running statistics
  model.loadStateDict(Object.fromEntries(fix.param_names.map((n) => [n, tensorOf(fix.params[n]!)])), false);
  const per = t.replication_factor * t.gradient_accumulation;
  const res: TrajectoryResult = { losses: [], params: [] };
  for (let s = 0; s < t.steps; s++) {
    const batch = t.data.slice(s * per, (s + 1) * per);
    const out = model.run({ x: concat(batch.map((d) => tensorOf(d.x))), y: concat(batch.map((d) => tensorOf(d.y, 'int32'))) });
    res.losses.push(out['loss']!.toArray());
    res.params.push(model.stateDict());
  }
  return res;
}

// OutputMode is an enum of the frontend; imported lazily to keep this module's imports flat
import { OutputMode } from '@tilegraph/frontend';
function OutputModeAll(): OutputMode {
  return OutputMode.All;
}

/** Largest violation of |got - want| <= atol + rtol·|want| (<= 0 passes), skipping listed flat indices. */
export function worstViolation(got: ArrayLike<number>, want: ArrayLike<number>, atol: number, rtol: number, skip: readonly number[] = []): number {
  const skipSet = new Set(skip);
  let worst = -Infinity;
  for (let i = 0; i < want.length; i++) {
    if (skipSet.has(i)) continue;
    const v = Math.abs(got[i]! - want[i]!) - (atol + rtol * Math.abs(want[i]!));
    worst = Math.max(worst, Number.isNaN(v) ? Infinity : v);
  }
  return worst;
}
