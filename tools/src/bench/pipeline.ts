import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { GC200_COST_MODEL, estimateModuleCycles, formatBytes } from '@tilegraph/codegen-poplar';
import { Options, PipelinedExecution, ShardedExecution, loadModelFile } from '@tilegraph/frontend';
import { Rng, Tensor } from '@tilegraph/ir';
import { buildTrainingModule, makeOptimizer } from '@tilegraph/passes';
import { compiledBackend, stepSettingsFrom, trainingModel } from '@tilegraph/runtime';
import { pipelineReport } from '../commands/report.js';

/**
 * Pipeline benchmark: the BERT-base-shaped encoder of examples/bert.tg (d_model 768, 12 heads,
 * ff 3072) cut to 4 layers over 4 IPUs and a short sequence, trained with SGD and gradient
 * accumulation 16 (bubble (7−1)/(16+7−1) = 27%) on the emulated IPU (compiled Poplar C++ on poplar-host), once with
 * PipelinedExecution and once with ShardedExecution: training samples/s of each (a warm-up step,
 * which also compiles, excluded), the measured speed-up of pipelining beside the speed-up the
 * GC200 cost model predicts (estimatePipeline for the pipeline, the executions one after another
 * for sharding), and the predicted bubble by PopART's formula and from the estimates. The
 * emulator runs each IPU's part of the program on a thread, so on this machine at most
 * min(cores, IPUs) stages overlap: the measured speed-up is bounded by the cores, the predicted
 * one by the IPUs.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const BERT = path.resolve(here, '../../../examples/bert.tg');
const SHAPE = { batch: 1, seq: 16, d_model: 768, heads: 12, ff: 3072, layers: 4, ipus: 4, classes: 2 };
const ACCUMULATION = 16;
const STEPS = 2; // timed steps after the warm-up

type Strategy = 'pipelined' | 'sharded';

function optionsFor(s: Strategy): Options {
  const o = new Options();
  o.Training.gradientAccumulation(ACCUMULATION);
  o.setExecutionStrategy(s === 'pipelined' ? new PipelinedExecution() : new ShardedExecution());
  return o;
}

function inputsFor(seed: number): Record<string, Tensor> {
  const rng = new Rng(seed);
  const n = SHAPE.batch * ACCUMULATION;
  return {
    x: Tensor.from('float32', [n, SHAPE.seq, SHAPE.d_model], Array.from({ length: n * SHAPE.seq * SHAPE.d_model }, () => rng.normal())),
    y: Tensor.from('int32', [n], Array.from({ length: n }, () => rng.nextU32() % SHAPE.classes)),
  };
}

interface Measured {
  readonly compileS: number;
  readonly warmupS: number;
  readonly stepS: number;
  readonly samplesPerS: number;
}

function measure(s: Strategy): Measured {
  const g = loadModelFile(BERT, { args: SHAPE });
  const m = trainingModel(g, optionsFor(s), makeOptimizer('SGD', { lr: 1e-3 }), { backend: compiledBackend });
  const t0 = performance.now();
  m.compile(); // passes, C++ generation, the build (or the executable cache) and the engine's start
  const t1 = performance.now();
  m.run(inputsFor(0));
  const t2 = performance.now();
  for (let i = 1; i <= STEPS; i++) m.run(inputsFor(i));
  const stepS = (performance.now() - t2) / 1000 / STEPS;
  return { compileS: (t1 - t0) / 1000, warmupS: (t2 - t1) / 1000, stepS, samplesPerS: (SHAPE.batch * ACCUMULATION) / stepS };
}

/** Predicted cycles per weight update on a GC200 and, pipelined, the bubble and the stash per IPU. */
function predict(s: Strategy): { cycles: number; bubble?: { formula: number | null; estimate: number }; stash?: readonly { ipu: number; bytes: number }[] } {
  const g = loadModelFile(BERT, { args: SHAPE });
  const t = buildTrainingModule(g, stepSettingsFrom(optionsFor(s)), makeOptimizer('SGD', { lr: 1e-3 }));
  if (s === 'sharded') {
    if (t.pipeline) throw new Error('ShardedExecution built a pipeline');
    return { cycles: estimateModuleCycles(t.module).cycles };
  }
  const r = pipelineReport(t.module, t.placement, t.pipeline, { ipus: SHAPE.ipus }).schedule;
  if (!r) throw new Error('PipelinedExecution built no pipeline');
  return { cycles: r.cyclesPerWeightUpdate, bubble: r.bubble, stash: r.stash };
}

export async function benchPipeline(): Promise<void> {
  const cores = os.availableParallelism();
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  console.log(
    `pipeline: BERT-base-shaped encoder (d_model ${SHAPE.d_model}, ${SHAPE.heads} heads, ff ${SHAPE.ff}, ${SHAPE.layers} layers, seq ${SHAPE.seq}, micro-batch ${SHAPE.batch}) ` +
      `over ${SHAPE.ipus} IPUs, SGD, gradient accumulation ${ACCUMULATION}; emulated IPU (compiled backend) on ${cores} core${cores === 1 ? '' : 's'}`,
  );
  const predicted = { pipelined: predict('pipelined'), sharded: predict('sharded') };
  const measured: Partial<Record<Strategy, Measured>> = {};
  for (const s of ['pipelined', 'sharded'] as const) {
    const r = measure(s);
    measured[s] = r;
    console.log(
      `  ${s.padEnd(9)}: ${r.samplesPerS.toFixed(2).padStart(6)} samples/s measured (${r.stepS.toFixed(1)} s a step of ${SHAPE.batch * ACCUMULATION} samples, mean of ${STEPS}; ` +
        `compile ${r.compileS.toFixed(0)} s, warm-up step ${r.warmupS.toFixed(1)} s); predicted on a GC200: ${predicted[s].cycles} cycles per weight update ` +
        `(${((SHAPE.batch * ACCUMULATION * GC200_COST_MODEL.clockHz) / predicted[s].cycles).toFixed(0)} samples/s)`,
    );
  }
  const p = measured.pipelined!;
  const sh = measured.sharded!;
  const bubble = predicted.pipelined.bubble!;
  const stages = 2 * SHAPE.ipus - 1;
  console.log(`  pipelined / sharded samples/s: ${(p.samplesPerS / sh.samplesPerS).toFixed(2)}× measured, ${(predicted.sharded.cycles / predicted.pipelined.cycles).toFixed(2)}× predicted (GC200 cost model)`);
  console.log(`  predicted bubble: ${pct(bubble.formula ?? NaN)} by (p−1)/(m+p−1) with p = ${stages} stages, m = ${ACCUMULATION}; ${pct(bubble.estimate)} from the per-stage estimates`);
  console.log(`  stash (ring buffers) per IPU: ${predicted.pipelined.stash!.map((x) => `IPU ${x.ipu} ${formatBytes(x.bytes)}`).join(', ')}`);
  const env = ['POPLAR_HOST_THREADS', 'POPLAR_HOST_IPU_THREADS'].filter((k) => process.env[k] !== undefined).map((k) => `${k}=${process.env[k]}`);
  console.log(
    `  (the emulator runs each IPU on a thread: with ${cores} core${cores === 1 ? '' : 's'} at most ${Math.min(cores, SHAPE.ipus)} of the ${SHAPE.ipus} IPUs compute at once, ` +
      `so the measured speed-up is bounded by the cores, not by the bubble${env.length ? `; ${env.join(' ')}` : ''})`,
  );
}
