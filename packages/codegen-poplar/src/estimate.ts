import { DType, Graph, Module, Op, ProgramNode, Value, dtypeByteSize, isFloat, numElements } from '@tilegraph/ir';

/**
 * A cost model of the cycles one execution of a graph takes on a Mk2 GC200 IPU: an ESTIMATE from
 * the shapes and types of the ops of the IR (as it reaches the generator, after `decompose`), not
 * a measurement. It is meant for comparing placements and pipeline schedules (where are the busy
 * IPUs, how big is the bubble), not for predicting wall-clock time to better than a small factor:
 * it ignores poplin's planning, tile mapping, memory-bank conflicts, fusion of element-wise chains
 * and the host link. Every figure grows (never shrinks) with the size of the op.
 *
 * The model, per op:
 * - matmul / convolution: FLOPs (2 per multiply-add) at the AMP unit's peak rate per tile for the
 *   type, spread over all tiles, plus the exchange of both operands once across the IPU, plus
 *   `matmulComputeSets` compute-set syncs (poplin's rearrangement, partials, reduction).
 * - element-wise, random, copies (assign, copying movement ops): the elements split over the
 *   tiles (a grain of one vector per worker) and, on a tile, over its workers, each worker
 *   handling `vectorWidth` elements per instruction; the six workers are barrel-scheduled, so a
 *   worker instruction takes `workers` clock cycles. Transcendentals cost
 *   `transcendentalFactor` instructions per vector. Plus one compute-set sync, shared as the
 *   generator shares the compute set (`mergeComputeSets`): in a run of such work between two
 *   PopLibs steps, an op joins the compute set after the last one its operands come from, and only
 *   an op that opens a compute set pays the sync.
 * - reductions: the element-wise cost of reading the input, the partial results of every tile
 *   exchanged, then reduced again: two compute sets.
 * - pools: element-wise work of (output elements × window).
 * - views (reshape, slice, expand, split, ...) cost nothing; views that rearrange data across
 *   tiles (transpose, concat, tile, pad) cost the exchange of their result.
 * - sources, state reads and annotations cost nothing.
 * - an operand made on another IPU (a sharded graph) adds its bytes at the inter-IPU rate.
 */

/** The constants of the cost model. All can be overridden (`EstimateOptions`). */
export interface CostModel {
  /** Tiles per IPU (GC200: 1472, POPLAR-NOTES.md). */
  readonly tiles: number;
  /** Worker contexts per tile (GC200: 6, POPLAR-NOTES.md); barrel-scheduled, one instruction each per `workers` cycles. */
  readonly workers: number;
  /**
   * The tile clock in Hz, to turn cycles into seconds. 1.33 GHz: the GC200 in an IPU-M2000
   * (POPLAR-NOTES.md: the clock is not fixed for GC200, keep it an option — it is).
   */
  readonly clockHz: number;
  /**
   * Peak FLOPs per cycle per tile of the AMP (accumulating matrix product) unit, by operand type.
   * float16: 250 TFLOP/s per IPU (POPLAR-NOTES.md, the M2000 datasheet's 1 PFLOP/s for 4 IPUs)
   * / (1472 tiles × 1.33 GHz) = 127.7 → 128 FLOP (64 multiply-adds) per cycle per tile.
   * float32: Graphcore's published GC200 FP32 peak of 62.5 TFLOP/s, a quarter of float16 → 32
   * FLOP (16 multiply-adds) per cycle per tile. Integer products have no AMP path (the generator
   * runs them in a generated vertex): one multiply-add per cycle per tile, 2 FLOP.
   */
  readonly ampFlopsPerCycle: { readonly float16: number; readonly float32: number; readonly integer: number };
  /**
   * Elements per worker instruction of element-wise code, by type: the tile's 64-bit datapath
   * holds 2 float32 or 4 float16 (f32v2 / f16v4 instructions); integers and bools are scalar.
   */
  readonly vectorWidth: Readonly<Partial<Record<DType, number>>>;
  /** Worker instructions per vector of a transcendental (exp, log, tanh, erf, ...): an assumption. */
  readonly transcendentalFactor: number;
  /**
   * Cycles of one compute set beyond its vertices' work: the BSP sync and the vertex launch. An
   * assumption of the order of magnitude (a sync across the IPU is some tens to a few hundred
   * cycles), not a published figure.
   */
  readonly syncCycles: number;
  /** Compute sets (syncs) of one poplin matmul or convolution: rearrange, partial products, reduce. */
  readonly matmulComputeSets: number;
  /** On-chip exchange, bytes per second per IPU: 47.5 TB/s (POPLAR-NOTES.md). */
  readonly exchangeBytesPerSecond: number;
  /**
   * IPU-to-IPU copies, bytes per second: 320 GB/s, Graphcore's published IPU-Link bandwidth of a
   * GC200 (all its links together). POPLAR-NOTES.md says "about 8 TB/s IPU-to-IPU"; that figure
   * is the all-to-all on-chip exchange of the first-generation IPU, not a link rate, so the
   * conservative link figure is the default.
   */
  readonly interIpuBytesPerSecond: number;
  /**
   * Independent generated-vertex work shares compute sets, and so syncs, as the generator's
   * `mergeComputeSets` option (default on) makes it.
   */
  readonly mergeComputeSets: boolean;
}

export const GC200_COST_MODEL: CostModel = {
  tiles: 1472,
  workers: 6,
  clockHz: 1.33e9,
  ampFlopsPerCycle: { float16: 128, float32: 32, integer: 2 },
  vectorWidth: { float32: 2, float16: 4, float64: 1, int32: 1, uint32: 1, bool: 1 },
  transcendentalFactor: 4,
  syncCycles: 100,
  matmulComputeSets: 3,
  exchangeBytesPerSecond: 47.5e12,
  interIpuBytesPerSecond: 320e9,
  mergeComputeSets: true,
};

export type EstimateOptions = Partial<CostModel>;

/** The estimate of one op. */
export interface OpEstimate {
  readonly kind: string;
  /** Compute + exchange + sync. */
  readonly cycles: number;
  readonly compute: number;
  readonly exchange: number;
  readonly sync: number;
  /** The op's IPU (its `ipu` annotation; 0 without one). */
  readonly ipu: number;
}

export interface GraphEstimate {
  /** The sum of the ops' cycles (the ops of a graph run one after another). */
  readonly cycles: number;
  /** One entry per op, in the graph's order. */
  readonly byOp: readonly OpEstimate[];
  /** The cycles of each op kind, largest first. */
  readonly byKind: readonly { readonly kind: string; readonly ops: number; readonly cycles: number }[];
  /** Cycles per IPU the graph's ops run on (a sharded graph's ops run one after another). */
  readonly byIpu: ReadonlyMap<number, number>;
  /** `cycles` at the model's clock. */
  readonly seconds: number;
}

const FREE = new Set([
  'input',
  'parameter',
  'constant',
  'variable',
  // pure views: a Poplar tensor expression, no code
  'reshape',
  'squeeze',
  'unsqueeze',
  'flatten',
  'slice',
  'split',
  'expand',
  // annotations
  'identity',
  'nop',
  'recomputation_checkpoint',
  'set_available_memory',
  'set_overlap_for_input',
  'set_overlap_for_output',
  'ipu_print_tensor',
]);
/** Views whose reader gathers elements from across the tiles. */
const REARRANGING_VIEWS = new Set(['transpose', 'concat', 'tile', 'pad']);
const COPIES = new Set(['assign', 'slice_grad', 'gather', 'scatter_add', 'dynamic_slice', 'dynamic_update_slice']);
const REDUCTIONS = new Set(['reduce_sum', 'reduce_mean', 'reduce_max', 'reduce_min', 'reduce_prod', 'argmax', 'identity_loss']);
const POOLS = new Set(['max_pool', 'avg_pool', 'max_pool_grad', 'avg_pool_grad']);
const TRANSCENDENTAL = new Set(['exp', 'log', 'sqrt', 'reciprocal', 'div', 'pow', 'tanh', 'sigmoid', 'gelu', 'erf', 'sin', 'cos', 'random_normal', 'dropout', 'random_uniform']);

function model(opts: EstimateOptions | undefined): CostModel {
  return opts ? { ...GC200_COST_MODEL, ...opts } : GC200_COST_MODEL;
}

/** Exchange bytes per cycle across one IPU. */
function exchangePerCycle(c: CostModel): number {
  return c.exchangeBytesPerSecond / c.clockHz;
}

/** Cycles of moving `bytes` between two IPUs. */
export function interIpuCycles(bytes: number, opts?: EstimateOptions): number {
  const c = model(opts);
  return bytes <= 0 ? 0 : Math.ceil(bytes / (c.interIpuBytesPerSecond / c.clockHz));
}

/** Cycles of moving `bytes` across the tiles of one IPU. */
export function exchangeCycles(bytes: number, opts?: EstimateOptions): number {
  const c = model(opts);
  return bytes <= 0 ? 0 : Math.ceil(bytes / exchangePerCycle(c));
}

/**
 * Cycles of the vertices of an element-wise compute set over `elements` elements of `dtype`
 * (no sync): spread over the tiles a vector per worker at a time, then over the workers.
 */
export function elementwiseCycles(elements: number, dtype: DType, opts?: EstimateOptions, factor = 1): number {
  if (elements <= 0) return 0;
  const c = model(opts);
  const grain = c.workers * (c.vectorWidth[dtype] ?? 1);
  const tilesUsed = Math.min(c.tiles, Math.ceil(elements / grain));
  const perTile = Math.ceil(elements / tilesUsed);
  // each worker's instructions, each taking `workers` cycles of the barrel-scheduled tile
  return Math.ceil(perTile / grain) * factor * c.workers;
}

/** Cycles of the AMP work of `flops` FLOPs of `dtype` spread over all tiles (no exchange, no sync). */
export function ampCycles(flops: number, dtype: DType, opts?: EstimateOptions): number {
  if (flops <= 0) return 0;
  const c = model(opts);
  const rate = dtype === 'float16' ? c.ampFlopsPerCycle.float16 : isFloat(dtype) ? c.ampFlopsPerCycle.float32 : c.ampFlopsPerCycle.integer;
  return Math.ceil(flops / (rate * c.tiles));
}

const bytesOf = (v: { type: { dtype: DType; shape: readonly number[] } }) => numElements(v.type.shape) * dtypeByteSize(v.type.dtype);

/** The estimate of one op of a decomposed graph (ops `decompose` removes get the element-wise estimate of their results). */
export function estimateOp(op: Op, opts?: EstimateOptions): OpEstimate {
  const c = model(opts);
  const ipu = op.annotations.ipu ?? 0;
  let compute = 0;
  let exchange = 0;
  let syncs = 0;
  const kind = op.kind;
  const out = op.results[0];
  const outElems = out ? numElements(out.type.shape) : 0;
  const dtype: DType = out?.type.dtype ?? 'float32';
  if (FREE.has(kind)) {
    // nothing: a view, a state read or an annotation
  } else if (REARRANGING_VIEWS.has(kind)) {
    exchange = exchangeCycles(op.results.reduce((n, r) => n + bytesOf(r), 0), c);
  } else if (kind === 'matmul') {
    const [a, b] = op.operands as [Value, Value];
    const k = a.type.shape[a.type.shape.length - 1] ?? 1;
    compute = ampCycles(2 * outElems * k, a.type.dtype, c);
    exchange = exchangeCycles(bytesOf(a) + bytesOf(b), c);
    syncs = c.matmulComputeSets;
  } else if (kind === 'convolution') {
    const [x, w] = op.operands as [Value, Value];
    // [N, M, out...] outputs, each a dot product over C/G × the kernel
    compute = ampCycles(2 * outElems * numElements(w.type.shape.slice(1)), x.type.dtype, c);
    exchange = exchangeCycles(bytesOf(x) + bytesOf(w), c);
    syncs = c.matmulComputeSets;
    if (op.operands.length > 2) {
      compute += elementwiseCycles(outElems, dtype, c);
      syncs++;
    }
  } else if (kind === 'convolution_weights_grad') {
    // poplin::calculateWeightDeltas: [M, C/G, kernel...] outputs, each a dot product over N × the output field
    const [dy, x] = op.operands as [Value, Value];
    const n = dy.type.shape[0] ?? 1;
    compute = ampCycles(2 * outElems * n * numElements(dy.type.shape.slice(2)), x.type.dtype, c);
    exchange = exchangeCycles(bytesOf(dy) + bytesOf(x), c);
    syncs = c.matmulComputeSets;
  } else if (kind === 'batch_norm_stats') {
    // popnn::bn::batchNormStatistics: two passes over x, each reduction two stages
    const x = op.operands[0]!;
    compute = 2 * elementwiseCycles(numElements(x.type.shape), x.type.dtype, c);
    exchange = exchangeCycles(bytesOf(x), c);
    syncs = 4;
  } else if (kind === 'batch_norm_grad') {
    // popnn::bn: the statistics unless given (two passes over x), the channel sums of g and g·x̂
    // (one over both) and dx (two more, for its own sums and itself, unless no op reads dx):
    // up to five element-wise passes, each reduction two stages
    const x = op.operands[1]!;
    const given = op.operands.length === 5; // the forward's statistics: two passes and two reductions fewer
    const dxRead = op.results[0]!.uses.length > 0;
    compute = ((given ? 1 : 3) + (dxRead ? 2 : 0)) * elementwiseCycles(numElements(x.type.shape), x.type.dtype, c);
    exchange = exchangeCycles(bytesOf(x), c);
    syncs = (given ? 1 : 5) + (dxRead ? 2 : 0);
  } else if (REDUCTIONS.has(kind)) {
    const x = op.operands[0]!;
    const inElems = numElements(x.type.shape);
    compute = elementwiseCycles(inElems, x.type.dtype, c);
    // the first stage leaves a partial per output element on every tile the input spans
    const grain = c.workers * (c.vectorWidth[x.type.dtype] ?? 1);
    const tilesUsed = Math.min(c.tiles, Math.ceil(inElems / grain));
    const partials = Math.min(inElems, Math.max(outElems, 1) * tilesUsed);
    exchange = exchangeCycles(partials * 4, c);
    compute += elementwiseCycles(partials, 'float32', c);
    syncs = 2;
  } else if (POOLS.has(kind)) {
    const kernel = (op.attrs['kernel'] as number[] | undefined) ?? [1, 1];
    const window = kernel.reduce((n, d) => n * d, 1);
    const work = kind.endsWith('_grad') ? Math.max(outElems, numElements(op.operands[op.operands.length - 1]!.type.shape)) : outElems;
    compute = elementwiseCycles(work * window, dtype, c);
    syncs = 1;
  } else if (kind === 'for_loop') {
    // the body's ops every iteration, and the copies of the carried values back into place
    const body = op.attrs['body'] as Graph;
    const count = op.attrs['count'] as number;
    for (const x of body.ops) {
      const e = estimateOp(x, c);
      compute += count * e.compute;
      exchange += count * e.exchange;
      syncs += count * (e.sync / c.syncCycles);
    }
    exchange += (count + 1) * exchangeCycles(op.results.reduce((n, r) => n + bytesOf(r), 0), c);
  } else if (COPIES.has(kind)) {
    const moved = kind === 'assign' ? op.operands[0]! : out!;
    compute = elementwiseCycles(numElements(moved.type.shape), moved.type.dtype, c);
    if (kind !== 'assign') exchange = exchangeCycles(bytesOf(moved), c);
    syncs = 1;
  } else {
    // element-wise, random, and anything else: the elements of its results
    compute = elementwiseCycles(outElems, dtype, c, TRANSCENDENTAL.has(kind) ? c.transcendentalFactor : 1);
    syncs = 1;
  }
  // operands made on another IPU come over the IPU-Links first
  let remote = 0;
  if (op.annotations.ipu !== undefined) {
    for (const v of op.operands) {
      const p = v.producer.annotations.ipu;
      if (p !== undefined && p !== op.annotations.ipu) remote += bytesOf(v);
    }
  }
  exchange += interIpuCycles(remote, c);
  const sync = syncs * c.syncCycles;
  return { kind, cycles: compute + exchange + sync, compute, exchange, sync, ipu };
}

/**
 * The estimated cycles of one execution of graph `g` on one IPU of a GC200 (a graph whose ops
 * are on several IPUs, a sharded step, is estimated as its ops one after another): the sum of
 * the ops' estimates. See the cost model at the top of this file; an estimate, not a measurement.
 */
export function estimateGraphCycles(g: Graph, opts?: EstimateOptions): GraphEstimate {
  const c = model(opts);
  const shared = c.mergeComputeSets ? sharedComputeSets(g) : new Set<Op>();
  const byOp = g.ops.map((op) => {
    const e = estimateOp(op, c);
    return shared.has(op) ? { ...e, cycles: e.cycles - c.syncCycles, sync: e.sync - c.syncCycles } : e;
  });
  const kinds = new Map<string, { kind: string; ops: number; cycles: number }>();
  const byIpu = new Map<number, number>();
  let cycles = 0;
  for (const e of byOp) {
    cycles += e.cycles;
    const k = kinds.get(e.kind) ?? { kind: e.kind, ops: 0, cycles: 0 };
    k.ops++;
    k.cycles += e.cycles;
    kinds.set(e.kind, k);
    byIpu.set(e.ipu, (byIpu.get(e.ipu) ?? 0) + e.cycles);
  }
  const byKind = [...kinds.values()].sort((a, b) => b.cycles - a.cycles);
  return { cycles, byOp, byKind, byIpu, seconds: cycles / c.clockHz };
}

/** Ops run by a generated vertex in a compute set of their own kind (element-wise, random, pools, argmax, integer products). */
function isVertexWork(op: Op): boolean {
  if (POOLS.has(op.kind) || op.kind === 'argmax') return true;
  if (op.kind === 'matmul') return !isFloat(op.result.type.dtype);
  if (FREE.has(op.kind) || REARRANGING_VIEWS.has(op.kind) || COPIES.has(op.kind) || REDUCTIONS.has(op.kind) || op.kind === 'convolution' || op.results.length === 0) return false;
  return !op.kind.startsWith('conv');
}

/**
 * The ops of a graph that join a compute set another op opened (and so pay no sync of their own),
 * as the generator merges them: between two PopLibs steps, each piece of vertex work runs in the
 * first compute set after those of the work its operands come from (through views).
 */
function sharedComputeSets(g: Graph): Set<Op> {
  const shared = new Set<Op>();
  // the compute set (index in the open run) that made each value, through views
  const level = new Map<Value, number>();
  let levels = 0;
  for (const op of g.ops) {
    if (isVertexWork(op)) {
      let at = 0;
      for (const v of op.operands) {
        const l = level.get(v);
        if (l !== undefined) at = Math.max(at, l + 1);
      }
      if (at < levels) shared.add(op);
      else levels = at + 1;
      for (const r of op.results) level.set(r, at);
    } else if (op.kind === 'assign') {
      // a state write waits for the compute set of its value; later work may share compute sets before it
    } else if ((FREE.has(op.kind) && op.kind !== 'ipu_print_tensor') || REARRANGING_VIEWS.has(op.kind)) {
      // views keep their operand's compute set
      const l = Math.max(-1, ...op.operands.map((v) => level.get(v) ?? -1));
      if (l >= 0) for (const r of op.results) level.set(r, l);
    } else {
      // a PopLibs step: the next vertex work opens a new compute set
      level.clear();
      levels = 0;
    }
  }
  return shared;
}

/** How many times one run of `program` executes each graph. */
export function executionCounts(program: ProgramNode): Map<string, number> {
  const counts = new Map<string, number>();
  const visit = (n: ProgramNode, times: number): void => {
    if (n.kind === 'execute') counts.set(n.graph, (counts.get(n.graph) ?? 0) + times);
    else if (n.kind === 'sequence') for (const b of n.body) visit(b, times);
    else if (n.kind === 'repeat') visit(n.body, times * n.count);
  };
  visit(program, 1);
  return counts;
}

/**
 * The estimated cycles of one run of a module's program with every graph execution one after
 * another (what ShardedExecution does): Σ executions × the graph's estimate, plus the pipeline
 * copies, stashes and restores of the program at the exchange rates (inter-IPU when the two
 * variables are on different IPUs). Host streams, collectives and remote buffers are not
 * counted. For a pipelined module this is the time if its stages did not overlap.
 */
export function estimateModuleCycles(m: Module, opts?: EstimateOptions): { cycles: number; byGraph: ReadonlyMap<string, { executions: number; cycles: number }> } {
  const c = model(opts);
  const byGraph = new Map<string, { executions: number; cycles: number }>();
  for (const [name, times] of executionCounts(m.program)) {
    const g = m.graphs.get(name);
    if (g) byGraph.set(name, { executions: times, cycles: estimateGraphCycles(g, c).cycles });
  }
  let cycles = 0;
  for (const x of byGraph.values()) cycles += x.executions * x.cycles;
  const moveCycles = (from: string, to: string): number => {
    const a = m.variables.get(from);
    const b = m.variables.get(to);
    const v = a && b ? (numElements(a.type.shape) <= numElements(b.type.shape) ? a : b) : (a ?? b);
    if (!v) return 0;
    const bytes = numElements(v.type.shape) * dtypeByteSize(v.type.dtype);
    return a?.ipu !== undefined && b?.ipu !== undefined && a.ipu !== b.ipu ? interIpuCycles(bytes, c) : exchangeCycles(bytes, c);
  };
  const visit = (n: ProgramNode, times: number): void => {
    if (n.kind === 'sequence') for (const b of n.body) visit(b, times);
    else if (n.kind === 'repeat') visit(n.body, times * n.count);
    else if (n.kind === 'copy' || n.kind === 'stash' || n.kind === 'restore') {
      for (const p of n.pairs) {
        // a stash or restore moves one slot of its ring: the smaller of the two variables
        cycles += times * moveCycles(p.from, p.to);
      }
    }
  };
  visit(m.program, 1);
  return { cycles, byGraph };
}

// ----------------------------------------------------------------------------------------------
// Pipelines

/**
 * The parts of a pipeline's description (`PipelineInfo` of @tilegraph/passes) the estimate reads;
 * a PipelineInfo is one.
 */
export interface PipelineSchedule {
  readonly stages: readonly { readonly index: number; readonly ipu: number; readonly kind: string; readonly graph: string }[];
  readonly microBatches: number;
  readonly cycles: readonly { readonly cycle: number; readonly phase: 'fill' | 'main' | 'flush'; readonly stages: readonly { readonly stage: number; readonly microBatch: number }[] }[];
  /** `source` / `target`: the variables the producer writes and the reader reads (their `ipu` places the copy). */
  readonly transfers: readonly { readonly from: number; readonly to: number; readonly depth: number; readonly bytes: number; readonly ipu: number; readonly ring?: string; readonly source?: string; readonly target?: string }[];
  /** A pipeline (the default), or one stage at a time (execution phases). */
  readonly schedule?: 'pipelined' | 'sequential';
  /** A pipeline's schedule (default grouped, PopART's) and the cycles between micro-batches entering it. */
  readonly pipelineSchedule?: 'grouped' | 'interleaved' | 'sequential';
  readonly interval?: number;
}

export interface PipelineCycleEstimate {
  readonly cycle: number;
  readonly phase: 'fill' | 'main' | 'flush';
  /** Busy cycles of each IPU in the cycle (its active stages and its stashes, restores and on-chip copies), by IPU index. */
  readonly perIpu: readonly number[];
  /** The busiest IPU's cycles: the IPUs run side by side. */
  readonly compute: number;
  /** The inter-IPU copies at the end of the cycle. */
  readonly copy: number;
  /** compute + copy. */
  readonly cycles: number;
}

export interface PipelineEstimate {
  /** Each pipeline stage's graph, estimated. */
  readonly stages: readonly { readonly index: number; readonly ipu: number; readonly kind: string; readonly graph: string; readonly cycles: number }[];
  readonly microBatches: number;
  readonly ipus: number;
  readonly cycles: readonly PipelineCycleEstimate[];
  /** Σ of the cycles' durations: one pipelined loop (one weight update's micro-batches). */
  readonly loopCycles: number;
  /** Σ over cycles of the active stages' estimates: the work the IPUs do. */
  readonly usefulCycles: number;
  readonly bubble: {
    /**
     * The idle share with balanced stages and free copies, for p pipeline stages and m
     * micro-batches: grouped, PopART's (p − 1) / (m + p − 1); interleaved and sequential (a
     * micro-batch entering every L cycles, one stage per IPU per cycle, n IPUs),
     * 1 − p·m / (n·(L·(m − 1) + p)) — (n − 1)/(m + n − 1) interleaved, (n − 1)/n sequential.
     * Null for execution phases, whose stages span IPUs.
     */
    readonly formula: number | null;
    /** 1 − useful work / (IPUs × loop time), from the estimates. */
    readonly estimate: number;
  };
  /** Graphs outside the pipeline (the weight update), per weight update. */
  readonly updateCycles: number;
  /** loopCycles + updateCycles. */
  readonly cyclesPerWeightUpdate: number;
  readonly secondsPerWeightUpdate: number;
  /** With `microBatchSize`: samples per weight update / secondsPerWeightUpdate (one replica). */
  readonly samplesPerSecond?: number;
}

/**
 * Estimates a pipelined loop: each stage's graph (estimateGraphCycles); each cycle of the schedule
 * lasts as long as its busiest IPU — the stages sharing an IPU in a cycle add up, with the
 * stash pushes, restores and same-IPU copies at the on-chip exchange rate — plus the copies
 * between IPUs at the end of the cycle at the inter-IPU rate. The bubble is the idle share of the
 * `ipus` IPUs over the loop; the formula's is PopART's (p−1)/(m+p−1), with p the pipeline's depth
 * (its stages, or its longest chain of stages when independent ones share cycles). Graphs the program runs
 * outside the pipeline (the optimizer's update) count once per loop. A sequential schedule
 * (execution phases: one stage per cycle) is estimated the same way; a stage whose ops span
 * IPUs counts whole on its stage's IPU (its ops run one after another). Estimates, not measurements.
 */
export function estimatePipeline(m: Module, info: PipelineSchedule, ipusCount: number, opts: EstimateOptions & { microBatchSize?: number } = {}): PipelineEstimate {
  const { microBatchSize, ...rest } = opts;
  const c = model(rest);
  const stageCycles = info.stages.map((s) => {
    const g = m.graphs.get(s.graph);
    if (!g) throw new Error(`estimatePipeline: the module has no graph '${s.graph}' (stage ${s.index})`);
    return estimateGraphCycles(g, c).cycles;
  });
  const ipuOf = (k: number) => info.stages[k]!.ipu;
  // where a transfer's two variables live (a phase's ops keep their own IPUs)
  const fromIpu = (t: PipelineSchedule['transfers'][number]) => t.ipu;
  const toIpu = (t: PipelineSchedule['transfers'][number]) => (t.target !== undefined ? m.variables.get(t.target)?.ipu : undefined) ?? ipuOf(t.to);
  const ipus = Math.max(ipusCount, ...info.stages.map((s) => s.ipu + 1), ...info.transfers.map((t) => Math.max(fromIpu(t), toIpu(t)) + 1));
  const cycles: PipelineCycleEstimate[] = [];
  let loopCycles = 0;
  let usefulCycles = 0;
  for (const cy of info.cycles) {
    const perIpu = new Array<number>(ipus).fill(0);
    let copyBytes = 0;
    const active = new Set(cy.stages.map((s) => s.stage));
    for (const k of active) {
      perIpu[ipuOf(k)]! += stageCycles[k]!;
      usefulCycles += stageCycles[k]!;
    }
    for (const t of info.transfers) {
      if (t.depth > 1) {
        // a push of one slot on the producer's IPU when it runs, a pop when the reader runs
        const slot = t.bytes / t.depth;
        if (active.has(t.from)) perIpu[fromIpu(t)]! += exchangeCycles(slot, c);
        if (active.has(t.to)) perIpu[fromIpu(t)]! += exchangeCycles(slot, c);
        if (active.has(t.to) && toIpu(t) !== fromIpu(t)) copyBytes += slot;
      } else if (active.has(t.from)) {
        if (fromIpu(t) === toIpu(t)) perIpu[fromIpu(t)]! += exchangeCycles(t.bytes, c);
        else copyBytes += t.bytes;
      }
    }
    const compute = Math.max(0, ...perIpu);
    const copy = interIpuCycles(copyBytes, c);
    cycles.push({ cycle: cy.cycle, phase: cy.phase, perIpu, compute, copy, cycles: compute + copy });
    loopCycles += compute + copy;
  }
  const p = info.stages.length;
  const mb = info.microBatches;
  const L = info.interval ?? 1;
  const n = new Set(info.stages.map((s) => s.ipu)).size;
  // the pipeline's depth: its stages, or fewer when independent stages share cycles
  const d = info.cycles.length - L * (mb - 1);
  const formula =
    info.schedule === 'sequential' ? null : (info.pipelineSchedule ?? 'grouped') === 'grouped' ? (d - 1) / (mb + d - 1) : 1 - (p * mb) / (n * (L * (mb - 1) + d));
  const estimate = loopCycles > 0 ? 1 - usefulCycles / (ipus * loopCycles) : 0;
  // graphs outside the pipeline: per loop of the pipeline
  const counts = executionCounts(m.program);
  const stageGraphs = new Set(info.stages.map((s) => s.graph));
  const loops = (counts.get(info.stages[0]?.graph ?? '') ?? 0) / Math.max(1, mb);
  let updateCycles = 0;
  if (loops > 0) {
    for (const [name, times] of counts) {
      if (stageGraphs.has(name)) continue;
      const g = m.graphs.get(name);
      if (g) updateCycles += (times / loops) * estimateGraphCycles(g, c).cycles;
    }
  }
  updateCycles = Math.round(updateCycles);
  const cyclesPerWeightUpdate = loopCycles + updateCycles;
  const secondsPerWeightUpdate = cyclesPerWeightUpdate / c.clockHz;
  return {
    stages: info.stages.map((s, i) => ({ index: s.index, ipu: s.ipu, kind: s.kind, graph: s.graph, cycles: stageCycles[i]! })),
    microBatches: mb,
    ipus,
    cycles,
    loopCycles,
    usefulCycles,
    bubble: { formula, estimate },
    updateCycles,
    cyclesPerWeightUpdate,
    secondsPerWeightUpdate,
    ...(microBatchSize !== undefined && secondsPerWeightUpdate > 0 ? { samplesPerSecond: (microBatchSize * mb) / secondsPerWeightUpdate } : {}),
  };
}
