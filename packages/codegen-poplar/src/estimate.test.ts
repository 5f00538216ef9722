import { DType, Graph, GraphBuilder, Module, collectVariables, execute, repeat, seq } from '@tilegraph/ir';
import { GC200_COST_MODEL, PipelineSchedule, elementwiseCycles, estimateGraphCycles, estimateModuleCycles, estimateOp, estimatePipeline } from './estimate.js';

const ZEROS = { kind: 'init', fn: 'zeros', args: {} } as const;

function matmulGraph(m: number, k: number, n: number, dtype: DType = 'float32'): Graph {
  const b = new GraphBuilder('mm');
  const x = b.input('x', dtype, [m, k]);
  const w = b.parameter('w', dtype, [k, n], ZEROS);
  b.output('y', b.op('matmul', [x, w]));
  return b.graph;
}

function matmulCycles(m: number, k: number, n: number, dtype: DType = 'float32'): number {
  const g = matmulGraph(m, k, n, dtype);
  return estimateOp(g.ops.find((o) => o.kind === 'matmul')!).cycles;
}

describe('estimateGraphCycles', () => {
  test('a bigger matmul takes more cycles, in every dimension', () => {
    const base = matmulCycles(128, 768, 768);
    expect(matmulCycles(256, 768, 768)).toBeGreaterThan(base);
    expect(matmulCycles(128, 1536, 768)).toBeGreaterThan(base);
    expect(matmulCycles(128, 768, 3072)).toBeGreaterThan(base);
    // monotone over a sweep, small sizes included
    let last = 0;
    for (const s of [1, 2, 8, 32, 128, 512, 2048]) {
      const c = matmulCycles(s, s, s);
      expect(c).toBeGreaterThanOrEqual(last);
      last = c;
    }
  });

  test('a large matmul is compute bound at the AMP rate: FLOPs / (32 × 1472) cycles in float32', () => {
    const e = estimateOp(matmulGraph(1024, 1024, 1024).ops.find((o) => o.kind === 'matmul')!);
    expect(e.compute).toBe(Math.ceil((2 * 1024 ** 3) / (32 * 1472)));
    expect(e.compute).toBeGreaterThan(e.exchange + e.sync);
  });

  test('a float16 matmul is cheaper than the same float32 one', () => {
    for (const [m, k, n] of [
      [128, 768, 768],
      [1024, 1024, 1024],
      [16, 64, 64],
    ] as const) {
      expect(matmulCycles(m, k, n, 'float16')).toBeLessThan(matmulCycles(m, k, n, 'float32'));
    }
  });

  test("a graph's estimate is the sum of its ops'", () => {
    const b = new GraphBuilder('g');
    const x = b.input('x', 'float32', [32, 256]);
    const w = b.parameter('w', 'float32', [256, 512], ZEROS);
    const h = b.op('matmul', [x, w]);
    const r = b.op('gelu', [h]);
    const s = b.op('reduce_sum', [r], { axes: [1], keepdims: false });
    b.output('y', b.op('add', [s, b.scalar('float32', 1)]));
    const e = estimateGraphCycles(b.graph);
    expect(e.byOp).toHaveLength(b.graph.ops.length);
    expect(e.cycles).toBe(e.byOp.reduce((n, o) => n + o.cycles, 0));
    expect(e.byKind.reduce((n, k) => n + k.cycles, 0)).toBe(e.cycles);
    for (const o of e.byOp) expect(o.cycles).toBe(o.compute + o.exchange + o.sync);
    expect(e.seconds).toBeCloseTo(e.cycles / GC200_COST_MODEL.clockHz, 15);
    // sources and views are free; every compute set pays its sync
    expect(e.byOp.filter((o) => o.kind === 'input' || o.kind === 'parameter' || o.kind === 'constant').every((o) => o.cycles === 0)).toBe(true);
    expect(e.byOp.find((o) => o.kind === 'add')!.sync).toBe(GC200_COST_MODEL.syncCycles);
  });

  test('element-wise work grows with the elements, is cheaper in float16, dearer for transcendentals', () => {
    let last = 0;
    for (const n of [1, 12, 13, 1000, 17664, 17665, 1e5, 1e6, 1e7]) {
      const c = elementwiseCycles(n, 'float32');
      expect(c).toBeGreaterThanOrEqual(last);
      last = c;
    }
    // 1e6 floats: 680 per tile, 57 rounds of 2 elements × 6 workers, a worker instruction every 6 cycles
    expect(elementwiseCycles(1e6, 'float32')).toBe(Math.ceil(Math.ceil(1e6 / 1472) / 12) * 6);
    expect(elementwiseCycles(1e6, 'float16')).toBeLessThan(elementwiseCycles(1e6, 'float32'));
    const b = new GraphBuilder('g');
    const x = b.input('x', 'float32', [1000, 1000]);
    const add = b.addOp('add', [x, x]);
    const exp = b.addOp('exp', [x]);
    expect(estimateOp(exp).compute).toBe(4 * estimateOp(add).compute);
  });

  test('an operand from another IPU adds its bytes at the inter-IPU rate', () => {
    const b = new GraphBuilder('g');
    const x = b.input('x', 'float32', [1024, 1024]);
    b.annotations = { ipu: 0 };
    const y = b.op('relu', [x]);
    const same = b.addOp('relu', [y]);
    b.annotations = { ipu: 1 };
    const other = b.addOp('relu', [y]);
    expect(estimateOp(other).exchange - estimateOp(same).exchange).toBe(Math.ceil((4 * 1024 * 1024) / (320e9 / 1.33e9)));
    expect(estimateOp(other, { interIpuBytesPerSecond: 8e12 }).exchange).toBeLessThan(estimateOp(other).exchange);
  });
});

/** A module of three stage graphs of the given element-wise work, run as PopART's schedule over `micro` micro-batches. */
function pipelineOf(work: readonly number[], ipus: readonly number[], micro: number, transfers: PipelineSchedule['transfers'] = []): { m: Module; info: PipelineSchedule } {
  const graphs = new Map<string, Graph>();
  work.forEach((n, k) => {
    const b = new GraphBuilder(`stage${k}`);
    b.annotations = { ipu: ipus[k]!, stage: k };
    const v = b.op('variable', [], { name: `v${k}`, dtype: 'float32', shape: [n], init: ZEROS, role: 'pipeline' });
    b.addOp('assign', [b.op('relu', [v])], { name: `v${k}` });
    graphs.set(b.graph.name, b.graph);
  });
  const S = work.length;
  const cycles: PipelineSchedule['cycles'][number][] = [];
  for (let c = 0; c < micro + S - 1; c++) {
    const stages = work.map((_, k) => k).filter((k) => k <= c && c < k + micro).map((k) => ({ stage: k, microBatch: c - k }));
    cycles.push({ cycle: c, phase: c < S - 1 ? 'fill' : c < micro ? 'main' : 'flush', stages });
  }
  const update = new GraphBuilder('update');
  const u = update.op('variable', [], { name: 'u', dtype: 'float32', shape: [1000], init: ZEROS, role: 'counter' });
  update.addOp('assign', [update.op('neg', [u])], { name: 'u' });
  graphs.set('update', update.graph);
  const program = repeat(1, seq(...cycles.map((c) => seq(...c.stages.map((s) => execute(`stage${s.stage}`)))), execute('update')));
  const m: Module = { name: 'p', graphs, program, replicationFactor: 1, variables: collectVariables(graphs) };
  const info: PipelineSchedule = { stages: work.map((_, k) => ({ index: k, ipu: ipus[k]!, kind: 'forward', graph: `stage${k}` })), microBatches: micro, cycles, transfers };
  return { m, info };
}

describe('estimatePipeline', () => {
  test('balanced stages on their own IPUs without copies: the estimate is the formula (p−1)/(m+p−1)', () => {
    const { m, info } = pipelineOf([1e6, 1e6, 1e6], [0, 1, 2], 4);
    const e = estimatePipeline(m, info, 3);
    expect(e.bubble.formula).toBeCloseTo(2 / 6, 12);
    expect(e.bubble.estimate).toBeCloseTo(2 / 6, 12);
    const stage = e.stages[0]!.cycles;
    expect(e.stages.every((s) => s.cycles === stage)).toBe(true);
    expect(e.loopCycles).toBe(6 * stage);
    expect(e.usefulCycles).toBe(12 * stage);
    expect(e.updateCycles).toBe(estimateGraphCycles(m.graphs.get('update')!).cycles);
    expect(e.cyclesPerWeightUpdate).toBe(e.loopCycles + e.updateCycles);
  });

  test('stages sharing an IPU add up in a cycle; unbalanced stages widen the bubble', () => {
    const { m, info } = pipelineOf([1e6, 1e5, 1e6], [0, 1, 0], 4);
    const e = estimatePipeline(m, info, 2);
    const [a, b, c] = e.stages.map((s) => s.cycles) as [number, number, number];
    // cycle 2: stages 0 and 2 on IPU 0, stage 1 on IPU 1
    expect(e.cycles[2]!.perIpu).toEqual([a + c, b]);
    expect(e.cycles[2]!.cycles).toBe(a + c);
    expect(e.cycles[4]!.cycles).toBe(Math.max(c, b));
    expect(e.bubble.estimate).toBeCloseTo(1 - (4 * (a + b + c)) / (2 * e.loopCycles), 12);
    expect(e.bubble.estimate).toBeGreaterThan(0);
    expect(e.bubble.estimate).toBeLessThan(1);
    expect(estimatePipeline(m, info, 2, { microBatchSize: 8 }).samplesPerSecond).toBeCloseTo((8 * 4) / e.secondsPerWeightUpdate, 6);
  });

  test('copies between IPUs lengthen the cycles of the stage that sends them; stashes load their IPU', () => {
    const { m, info } = pipelineOf([1e5, 1e5, 1e5], [0, 1, 2], 4);
    const plain = estimatePipeline(m, info, 3);
    const copied = estimatePipeline(m, { ...info, transfers: [{ from: 0, to: 1, depth: 1, bytes: 1 << 20, ipu: 0 }] }, 3);
    expect(copied.cycles[0]!.copy).toBeGreaterThan(0);
    expect(copied.cycles[4]!.copy).toBe(0); // stage 0 is done by then
    expect(copied.loopCycles).toBeGreaterThan(plain.loopCycles);
    const stashed = estimatePipeline(m, { ...info, transfers: [{ from: 0, to: 2, depth: 2, bytes: 2 << 20, ipu: 0, ring: 'r' }] }, 3);
    expect(stashed.cycles[0]!.perIpu[0]).toBeGreaterThan(plain.cycles[0]!.perIpu[0]!);
    expect(stashed.cycles[0]!.copy).toBe(0);
  });

  test('a sequential schedule (execution phases) has no formula; its IPUs idle while others work', () => {
    const { m, info } = pipelineOf([1e6, 1e6], [0, 1], 2);
    const cycles = [0, 1].flatMap((mb) => [0, 1].map((k) => ({ cycle: 2 * mb + k, phase: 'main' as const, stages: [{ stage: k, microBatch: mb }] })));
    const e = estimatePipeline(m, { ...info, cycles, schedule: 'sequential' }, 2);
    expect(e.bubble.formula).toBeNull();
    expect(e.bubble.estimate).toBeCloseTo(0.5, 12);
  });

  test('estimateModuleCycles runs every execution one after another', () => {
    const { m } = pipelineOf([1e6, 1e5, 1e6], [0, 1, 0], 4);
    const r = estimateModuleCycles(m);
    const each = (g: string) => estimateGraphCycles(m.graphs.get(g)!).cycles;
    expect(r.cycles).toBe(4 * (each('stage0') + each('stage1') + each('stage2')) + each('update'));
    expect(r.byGraph.get('stage1')!.executions).toBe(4);
  });
});
