import { Graph, GraphBuilder, InitSpec, Value, fileLoc, getOpDef, parseGraph, printGraph, verifyGraph } from '@tilegraph/ir';

/**
 * IR benchmark: graphs of 1k, 10k and 100k ops (chains of matmul, bias add and activations over a
 * few inputs and shared weights, with residual adds), timing build, verifyGraph, printGraph and
 * parseGraph. Every phase should be linear: about 10x the time for 10x the ops.
 */

const SIZES = [1_000, 10_000, 100_000];
const WIDTH = 32;
const LAYERS_OF_WEIGHTS = 4;
const PHASES = ['build', 'verify', 'print', 'parse'] as const;
type Phase = (typeof PHASES)[number];

interface Row {
  ops: number;
  ms: Record<Phase, number>;
  textBytes: number;
  /** Largest heapUsed seen at the end of a phase. */
  peakHeap: number;
  /** Peak resident set of the process so far (sizes run in increasing order). */
  peakRss: number;
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

function measureOnce(n: number): Row {
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
  return { ops: g.numOps, ms: { build, verify, print, parse }, textBytes: text.length, peakHeap, peakRss: process.resourceUsage().maxRSS * 1024 };
}

/** The median of a few runs per phase, the same statistic at every size (a shared machine is noisy). */
function measure(n: number, runs: number): Row {
  const rows = Array.from({ length: runs }, () => measureOnce(n));
  const best = { ...rows[0]! };
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  best.ms = Object.fromEntries(PHASES.map((p) => [p, median(rows.map((r) => r.ms[p]))])) as Record<Phase, number>;
  best.peakHeap = Math.max(...rows.map((r) => r.peakHeap));
  best.peakRss = Math.max(...rows.map((r) => r.peakRss));
  return best;
}

const pad = (s: string, w: number) => s.padStart(w);
const fmt = (ms: number) => (ms < 10 ? ms.toFixed(2) : ms < 100 ? ms.toFixed(1) : ms.toFixed(0));

export async function benchIr(): Promise<void> {
  measureOnce(SIZES[0]!); // warm up the JIT
  const rows: Row[] = [];
  for (const n of SIZES) rows.push(measure(n, n <= 1_000 ? 5 : 3));

  const head = ['ops', ...PHASES.map((p) => `${p} ms`), 'text MB', 'heap MB', 'peak RSS MB'];
  const widths = head.map((h) => Math.max(h.length, 9));
  const line = (cells: string[]) => cells.map((c, i) => pad(c, widths[i]!)).join('  ');
  console.log('ir: build, verify, print and parse of chains of matmul/add/activation ops (growth: time ratio per 10x ops; ~10 is linear)');
  console.log(line(head));
  for (const r of rows) {
    console.log(line([String(r.ops), ...PHASES.map((p) => fmt(r.ms[p])), (r.textBytes / 2 ** 20).toFixed(1), (r.peakHeap / 2 ** 20).toFixed(0), (r.peakRss / 2 ** 20).toFixed(0)]));
  }
  // growth per 10x more ops: about 10 when linear, about 100 when quadratic
  for (let i = 1; i < rows.length; i++) {
    const a = rows[i - 1]!;
    const b = rows[i]!;
    const scale = b.ops / a.ops;
    const ratios = PHASES.map((p) => (b.ms[p] / a.ms[p] / (scale / 10)).toFixed(1));
    console.log(line([`${a.ops >= 1000 ? `${Math.round(a.ops / 1000)}k` : a.ops}->${Math.round(b.ops / 1000)}k`, ...ratios, '', '', '']));
  }
}
