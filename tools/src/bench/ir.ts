import { Graph, GraphBuilder, InitSpec, Value, fileLoc, getOpDef, parseGraph, printGraph, verifyGraph } from '@tilegraph/ir';
import { BenchRow } from '../report/bench-results.js';
import { BenchContext, BenchOutput, computedRow, measuredRow } from './results.js';

/**
 * IR benchmark: graphs of 1k, 10k and 100k ops (chains of matmul, bias add and activations over a
 * few inputs and shared weights, with residual adds), timing build, verifyGraph, printGraph and
 * parseGraph. Every phase should be linear: about 10x the time for 10x the ops. Each figure is the
 * median of `repeat` runs (--quick: 1k and 10k ops only).
 */

const SIZES = [1_000, 10_000, 100_000];
const WIDTH = 32;
const LAYERS_OF_WEIGHTS = 4;
const PHASES = ['build', 'verify', 'print', 'parse'] as const;
type Phase = (typeof PHASES)[number];

interface Run {
  ops: number;
  ms: Record<Phase, number>;
  textBytes: number;
  /** Largest heapUsed seen at the end of a phase. */
  peakHeap: number;
}

/** A realistic op mix of about `n` ops: matmul + add + activation per layer, residuals every few layers. */
export function buildBenchGraph(n: number): Graph {
  const b = new GraphBuilder(`bench${n}`);
  const hasMatmul = getOpDef('matmul') !== undefined;
  const x = b.input('x', 'float32', [8, WIDTH]);
  const y = b.input('y', 'float32', [8, WIDTH]);
  const weights: Value[] = [];
  const biases: Value[] = [];
  for (let i = 0; i < LAYERS_OF_WEIGHTS; i++) {
    const init: InitSpec = { kind: 'init', fn: 'xavier_uniform', args: { seed: i } };
    weights.push(b.parameter(`layer${i}.weight`, 'float32', [WIDTH, WIDTH], init));
    biases.push(b.parameter(`layer${i}.bias`, 'float32', [WIDTH], { kind: 'init', fn: 'zeros', args: {} }));
  }
  const acts = ['relu', 'tanh', 'sigmoid', 'gelu', 'neg', 'exp'].filter((k) => getOpDef(k));
  let h = b.op('add', [x, y]);
  let residual = h;
  let layer = 0;
  while (b.graph.numOps < n) {
    b.loc = fileLoc('bench.tg', 10 + layer, 5, `layer${layer % 7}`);
    const w = weights[layer % LAYERS_OF_WEIGHTS]!;
    h = hasMatmul ? b.op('matmul', [h, w]) : b.op('mul', [h, h]);
    h = b.op('add', [h, biases[layer % LAYERS_OF_WEIGHTS]!]);
    h = b.op(acts[layer % acts.length]!, [h]);
    if (layer % 4 === 3) {
      h = b.op('add', [h, residual]);
      residual = h;
    }
    layer++;
  }
  b.output('out', h);
  return b.graph;
}

function time<T>(f: () => T): [T, number] {
  const t0 = process.hrtime.bigint();
  const r = f();
  return [r, Number(process.hrtime.bigint() - t0) / 1e6];
}

function measureOnce(n: number): Run {
  (globalThis as { gc?: () => void }).gc?.();
  let peakHeap = process.memoryUsage().heapUsed;
  const sample = () => {
    peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
  };
  const [g, build] = time(() => buildBenchGraph(n));
  sample();
  const [diags, verify] = time(() => verifyGraph(g));
  sample();
  if (diags.length) throw new Error(`bench graph does not verify: ${diags[0]!.message}`);
  const [text, print] = time(() => printGraph(g, { debugInfo: true }));
  sample();
  const [back, parse] = time(() => parseGraph(text, 'bench.tgir'));
  sample();
  if (back.numOps !== g.numOps) throw new Error('parsed graph differs from the printed one');
  return { ops: g.numOps, ms: { build, verify, print, parse }, textBytes: text.length, peakHeap };
}

export async function benchIr(ctx: BenchContext): Promise<BenchOutput> {
  const sizes = ctx.quick ? SIZES.slice(0, 2) : SIZES;
  measureOnce(sizes[0]!); // warm up the JIT
  const rows: BenchRow[] = [];
  const medians: { ops: number; ms: Record<Phase, number> }[] = [];
  for (const n of sizes) {
    ctx.log(`${n} ops: ${ctx.repeat} runs`);
    const runs = Array.from({ length: ctx.repeat }, () => measureOnce(n));
    const ops = runs[0]!.ops;
    const phaseRows = PHASES.map((p) =>
      measuredRow({ benchmark: 'ir', case: `${ops} ops`, subject: 'tilegraph IR', metric: p, unit: 'ms', higherIsBetter: false, samples: runs.map((r) => r.ms[p]) }),
    );
    rows.push(...phaseRows);
    rows.push(measuredRow({ benchmark: 'ir', case: `${ops} ops`, subject: 'tilegraph IR', metric: 'peak heap', unit: 'bytes', higherIsBetter: false, samples: runs.map((r) => r.peakHeap) }));
    rows.push(computedRow({ benchmark: 'ir', case: `${ops} ops`, subject: 'tilegraph IR', metric: 'printed text', unit: 'bytes', higherIsBetter: false, value: runs[0]!.textBytes }));
    medians.push({ ops, ms: Object.fromEntries(PHASES.map((p, i) => [p, phaseRows[i]!.value.median])) as Record<Phase, number> });
  }
  // growth per 10x more ops: about 10 when linear, about 100 when quadratic
  const notes: string[] = [];
  for (let i = 1; i < medians.length; i++) {
    const a = medians[i - 1]!;
    const b = medians[i]!;
    const scale = b.ops / a.ops;
    notes.push(`growth ${a.ops} -> ${b.ops} ops (time ratio per 10x ops; ~10 is linear): ${PHASES.map((p) => `${p} ${(b.ms[p] / a.ms[p] / (scale / 10)).toFixed(1)}`).join(', ')}`);
  }
  notes.push(`peak RSS of the process: ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB`);
  return { title: 'build, verify, print and parse of chains of matmul/add/activation ops', rows, notes };
}
