import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { GC200_COST_MODEL, estimateModuleCycles, formatBytes } from '@tilegraph/codegen-poplar';
import { Options, PipelinedExecution, ShardedExecution, loadModelFile } from '@tilegraph/frontend';
import { Rng, Tensor } from '@tilegraph/ir';
import { buildTrainingModule, makeOptimizer } from '@tilegraph/passes';
import { compiledBackend, stepSettingsFrom, trainingModel } from '@tilegraph/runtime';
import { pipelineReport } from '../commands/report.js';
import { BenchRow } from '../report/bench-results.js';
import { BenchContext, BenchOutput, computedRow, measuredRow } from './results.js';

/**
 * Pipeline benchmark: the BERT-base-shaped encoder of examples/bert.tg (d_model 768, 12 heads,
 * ff 3072) cut to 4 layers over 4 IPUs and a short sequence, trained with SGD and gradient
 * accumulation 16 (bubble (7−1)/(16+7−1) = 27%) on the emulated IPU (compiled Poplar C++ on poplar-host), once with
 * PipelinedExecution and once with ShardedExecution: training samples/s of each, the median of
 * `repeat` steps timed one by one (a warm-up step, which also compiles, excluded), the measured speed-up of pipelining beside the speed-up the
 * GC200 cost model predicts (estimatePipeline for the pipeline, the executions one after another
 * for sharding), and the predicted bubble by PopART's formula and from the estimates. The
 * emulator runs each IPU's part of the program on a thread, so on this machine at most
 * min(cores, IPUs) stages overlap: the measured speed-up is bounded by the cores, the predicted
 * one by the IPUs.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const BERT = path.resolve(here, '../../../examples/bert.tg');
const SHAPE = { batch: 1, seq: 16, d_model: 768, heads: 12, ff: 3072, layers: 4, ipus: 4, classes: 2 };
/** --quick: the same structure, a quarter as wide. */
const QUICK_SHAPE = { ...SHAPE, d_model: 192, heads: 3, ff: 768 };
type Shape = typeof SHAPE;
const ACCUMULATION = 16;

type Strategy = 'pipelined' | 'sharded';

function optionsFor(s: Strategy): Options {
  const o = new Options();
  o.Training.gradientAccumulation(ACCUMULATION);
  o.setExecutionStrategy(s === 'pipelined' ? new PipelinedExecution() : new ShardedExecution());
  return o;
}

function inputsFor(shape: Shape, seed: number): Record<string, Tensor> {
  const rng = new Rng(seed);
  const n = shape.batch * ACCUMULATION;
  return {
    x: Tensor.from('float32', [n, shape.seq, shape.d_model], Array.from({ length: n * shape.seq * shape.d_model }, () => rng.normal())),
    y: Tensor.from('int32', [n], Array.from({ length: n }, () => rng.nextU32() % shape.classes)),
  };
}

interface Measured {
  readonly compileS: number;
  readonly warmupS: number;
  /** Samples per second of each timed step. */
  readonly samplesPerS: number[];
}

function measure(s: Strategy, shape: Shape, steps: number): Measured {
  const g = loadModelFile(BERT, { args: shape });
  const m = trainingModel(g, optionsFor(s), makeOptimizer('SGD', { lr: 1e-3 }), { backend: compiledBackend });
  try {
    const t0 = performance.now();
    m.compile(); // passes, C++ generation, the build (or the executable cache) and the engine's start
    const t1 = performance.now();
    m.run(inputsFor(shape, 0));
    const t2 = performance.now();
    const samplesPerS: number[] = [];
    for (let i = 1; i <= steps; i++) {
      const inputs = inputsFor(shape, i); // made outside the timed step
      const t = performance.now();
      m.run(inputs);
      samplesPerS.push((shape.batch * ACCUMULATION) / ((performance.now() - t) / 1000));
    }
    return { compileS: (t1 - t0) / 1000, warmupS: (t2 - t1) / 1000, samplesPerS };
  } finally {
    m.dispose();
  }
}

/** Predicted cycles per weight update on a GC200 and, pipelined, the bubble and the stash per IPU. */
function predict(s: Strategy, shape: Shape): { cycles: number; bubble?: { formula: number | null; estimate: number }; stash?: readonly { ipu: number; bytes: number }[] } {
  const g = loadModelFile(BERT, { args: shape });
  const t = buildTrainingModule(g, stepSettingsFrom(optionsFor(s)), makeOptimizer('SGD', { lr: 1e-3 }));
  if (s === 'sharded') {
    if (t.pipeline) throw new Error('ShardedExecution built a pipeline');
    return { cycles: estimateModuleCycles(t.module).cycles };
  }
  const r = pipelineReport(t.module, t.placement, t.pipeline, { ipus: shape.ipus }).schedule;
  if (!r) throw new Error('PipelinedExecution built no pipeline');
  return { cycles: r.cyclesPerWeightUpdate, bubble: r.bubble, stash: r.stash };
}

export async function benchPipeline(ctx: BenchContext): Promise<BenchOutput> {
  const shape = ctx.quick ? QUICK_SHAPE : SHAPE;
  const cores = os.availableParallelism();
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const samples = shape.batch * ACCUMULATION;
  const title =
    `BERT-base-shaped encoder (d_model ${shape.d_model}, ${shape.heads} heads, ff ${shape.ff}, ${shape.layers} layers, seq ${shape.seq}, micro-batch ${shape.batch}) ` +
    `over ${shape.ipus} IPUs, SGD, gradient accumulation ${ACCUMULATION}: PipelinedExecution beside ShardedExecution on the emulated IPU (compiled backend), ${cores} core${cores === 1 ? '' : 's'}`;
  const predicted = { pipelined: predict('pipelined', shape), sharded: predict('sharded', shape) };
  const measured: Partial<Record<Strategy, Measured>> = {};
  for (const s of ['pipelined', 'sharded'] as const) {
    ctx.log(`${s}: compiling, a warm-up step, ${ctx.repeat} timed steps of ${samples} samples`);
    measured[s] = measure(s, shape, ctx.repeat);
  }
  const p = measured.pipelined!;
  const sh = measured.sharded!;
  const gc200 = (s: Strategy) => (samples * GC200_COST_MODEL.clockHz) / predicted[s].cycles;
  const rows: BenchRow[] = [
    measuredRow({ benchmark: 'pipeline', case: 'training step', subject: 'PipelinedExecution', metric: 'throughput', unit: 'samples/s', higherIsBetter: true, samples: p.samplesPerS, peers: [{ name: 'ShardedExecution', samples: sh.samplesPerS }] }),
    computedRow({ benchmark: 'pipeline', case: 'training step, predicted on a GC200', subject: 'PipelinedExecution', metric: 'throughput', unit: 'samples/s', higherIsBetter: true, value: gc200('pipelined') }),
    computedRow({ benchmark: 'pipeline', case: 'training step, predicted on a GC200', subject: 'ShardedExecution', metric: 'throughput', unit: 'samples/s', higherIsBetter: true, value: gc200('sharded') }),
    ...(['pipelined', 'sharded'] as const).flatMap((s) => [
      measuredRow({ benchmark: 'pipeline', case: `${s}: compile`, subject: s === 'pipelined' ? 'PipelinedExecution' : 'ShardedExecution', metric: 'time', unit: 's', higherIsBetter: false, samples: [measured[s]!.compileS] }),
      measuredRow({ benchmark: 'pipeline', case: `${s}: warm-up step`, subject: s === 'pipelined' ? 'PipelinedExecution' : 'ShardedExecution', metric: 'time', unit: 's', higherIsBetter: false, samples: [measured[s]!.warmupS] }),
    ]),
  ];
  const bubble = predicted.pipelined.bubble!;
  const stages = 2 * shape.ipus - 1;
  const env = ['POPLAR_HOST_THREADS', 'POPLAR_HOST_IPU_THREADS'].filter((k) => process.env[k] !== undefined).map((k) => `${k}=${process.env[k]}`);
  return {
    title,
    rows,
    notes: [
      `predicted pipelined / sharded speed-up (GC200 cost model): ${(predicted.sharded.cycles / predicted.pipelined.cycles).toFixed(2)}×; cycles per weight update ${predicted.pipelined.cycles} pipelined, ${predicted.sharded.cycles} sharded`,
      `predicted bubble: ${pct(bubble.formula ?? NaN)} by (p−1)/(m+p−1) with p = ${stages} stages, m = ${ACCUMULATION}; ${pct(bubble.estimate)} from the per-stage estimates`,
      `stash (ring buffers) per IPU: ${predicted.pipelined.stash!.map((x) => `IPU ${x.ipu} ${formatBytes(x.bytes)}`).join(', ')}`,
      `the emulator runs each IPU on a thread: with ${cores} core${cores === 1 ? '' : 's'} at most ${Math.min(cores, shape.ipus)} of the ${shape.ipus} IPUs compute at once, ` +
        `so the measured speed-up is bounded by the cores, not by the bubble${env.length ? `; ${env.join(' ')}` : ''}`,
      'the two strategies are measured one after the other (each holds a compiled BERT-sized program); compile and warm-up are single runs',
    ],
  };
}
