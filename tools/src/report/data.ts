import { EstimateOptions, GeneratedSources, GraphEstimate, IpuMemory, PipelineEstimate, estimateGraphCycles, executionCounts } from '@tilegraph/codegen-poplar';
import { Diagnostic, Frame, Graph, Location, Module, Op, formatFrame, formatLocation, formatType } from '@tilegraph/ir';
import { PassTiming, PipelineInfo } from '@tilegraph/passes';
import { BenchSection } from './bench-view.js';
import { ProfileSection } from './profile-view.js';
import { PlannedAllocation, liveAt, tileUsage } from './tiles.js';

/**
 * The data of the HTML report: everything the page shows, computed here so that the page only
 * draws it. Names come from model files: the page inserts them as text, never as markup.
 */
export interface ReportData {
  readonly version: 1;
  /** The model file as given on the command line. */
  readonly file: string;
  readonly module: string;
  readonly pipeline: 'training' | 'inference';
  readonly device: { readonly ipus: number; readonly tilesPerIpu: number; readonly bytesPerTile: number; readonly replicationFactor: number; readonly clockHz: number };
  readonly fits: boolean;
  readonly problems: readonly DiagnosticData[];
  readonly warnings: readonly DiagnosticData[];
  /** Interned strings (locations, stacks, scopes): ops refer to them by index. */
  readonly strings: readonly string[];
  readonly graphs: readonly GraphData[];
  readonly timeline: TimelineData;
  readonly memory: MemoryData;
  readonly compile: CompileData;
  /** Benchmark results added with --bench (see bench-view.ts): the Benchmarks tab. */
  readonly bench?: BenchSection;
  /** A profiled run's measurements added with --profile (see profile-view.ts): the Profile tab. */
  readonly profile?: ProfileSection;
}

export interface DiagnosticData {
  readonly message: string;
  readonly location?: string;
  readonly notes: readonly string[];
}

export interface GraphData {
  readonly name: string;
  /** What the graph is: a pipeline stage and what it runs, the micro-batch step, the weight update. */
  readonly role: string;
  /** Executions per run of the program. */
  readonly executions: number;
  readonly cycles: number;
  readonly ops: readonly OpData[];
}

/** One op; `l`, `f`, `s` index ReportData.strings. */
export interface OpData {
  /** Kind. */
  readonly k: string;
  /** Result names (or the name attribute of an input or a parameter). */
  readonly n: string;
  /** Result types, "f32[4,16]". */
  readonly t: string;
  /** The user's source location. */
  readonly l: number;
  /** The whole stack, innermost first, one frame a line (only when it has more than one frame). */
  readonly f?: number;
  /** Name scope. */
  readonly s: number;
  readonly b?: string;
  readonly ipu?: number;
  readonly st?: number;
  readonly ph?: number;
  readonly rc?: 'checkpoint' | 'recompute';
  /** Operands: indices of their producers in the graph. */
  readonly i: readonly number[];
  /** Estimated cycles. */
  readonly c: number;
}

/** A stretch of an IPU's time in the schedule. */
export interface Segment {
  readonly ipu: number;
  readonly start: number;
  readonly end: number;
  readonly cat: 'forward' | 'backward' | 'forward+backward' | 'exchange' | 'copy' | 'graph';
  readonly label: string;
  readonly recompute?: true;
  readonly stage?: number;
  readonly microBatch?: number;
  readonly graph?: string;
}

export interface TimelineData {
  /** A pipeline, execution phases (one stage at a time), or graphs run one after another. */
  readonly kind: 'pipelined' | 'sequential' | 'step';
  readonly ipus: number;
  readonly total: number;
  readonly bands: readonly { readonly label: string; readonly kind: 'ramp-up' | 'main' | 'ramp-down' | 'update' | 'graph'; readonly start: number; readonly end: number }[];
  readonly segments: readonly Segment[];
  /** The pipeline's figures (report --json's schedule section): stages, bubble, stash, throughput. */
  readonly pipeline?: {
    readonly stages: readonly { readonly index: number; readonly ipu: number; readonly runs: string; readonly graph: string; readonly cycles: number; readonly recompute: boolean }[];
    readonly microBatches: number;
    readonly microBatchSize?: number;
    readonly bubble: { readonly formula: number | null; readonly estimate: number };
    readonly loopCycles: number;
    readonly updateCycles: number;
    readonly cyclesPerWeightUpdate: number;
    readonly secondsPerWeightUpdate: number;
    readonly samplesPerSecond?: number;
    readonly stash: readonly { readonly ipu: number; readonly bytes: number }[];
  };
  /** Without a pipeline: cycles of one run of the program (every execution of every graph). */
  readonly runCycles?: number;
}

export interface TensorData {
  readonly name: string;
  readonly kind: string;
  readonly bytes: number;
  /** Bytes on the tile the table is about (the fullest), or tiles the tensor spans. */
  readonly tileBytes?: number;
  readonly tiles?: number;
  readonly op?: string;
  readonly location?: string;
}

/** The plan's figures of an IPU (its fullest tile as an index within the IPU), with what the page draws. */
export interface IpuMemoryData extends Omit<IpuMemory, 'largestLive' | 'largestAlwaysLive'> {
  /** Per tile: always-live bytes and the peak of the rest (whole bytes). */
  readonly tilesAlwaysLive: readonly number[];
  readonly tilesPeak: readonly number[];
  /** The largest tensors live when the IPU's not-always-live bytes peak. */
  readonly atPeak: readonly TensorData[];
  readonly fullestTileLive: readonly TensorData[];
  readonly fullestTileAlwaysLive: readonly TensorData[];
}

export interface MemoryData {
  readonly perIpu: readonly IpuMemoryData[];
  /** Off-chip state (remote buffers in streaming memory). */
  readonly remote: readonly { readonly name: string; readonly ipu: number; readonly type: string; readonly bytes: number; readonly role: string }[];
}

export interface CompileData {
  readonly passes: readonly PassTiming[];
  readonly loadAndPassesMs: number;
  readonly generateMs: number;
}

/** What reportData reads: the built step, its generated program and the schedule sections. */
export interface ReportInputs {
  readonly file: string;
  readonly pipeline: 'training' | 'inference';
  readonly module: Module;
  readonly generated: GeneratedSources;
  readonly warnings: readonly Diagnostic[];
  readonly timings: readonly PassTiming[];
  readonly loadAndPassesMs: number;
  readonly generateMs: number;
  readonly schedule?: PipelineInfo;
  /** The schedule's estimate and figures (pipelineReport's), when pipelined. */
  readonly estimate?: PipelineEstimate;
  readonly scheduleSection?: TimelineData['pipeline'];
  readonly excludes: readonly string[];
  readonly costs: EstimateOptions;
  readonly clockHz: number;
}

/** Model-language standard library frames: the user wants the line in their own file (as the memory planner does). */
const STDLIB_PREFIX = 'std/';

/** The frame a user should see: their own code past the standard library, then sourceLocationExcludes. */
export function userLocation(loc: Location, excludes: readonly string[]): string {
  const own = loc.frames.filter((f) => !f.file.startsWith(STDLIB_PREFIX));
  return own.length ? formatLocation({ frames: own }, excludes) : formatLocation(loc, excludes);
}

function frameLine(f: Frame): string {
  return f.fn ? `${formatFrame(f)} in ${f.fn}` : formatFrame(f);
}

class Strings {
  readonly list: string[] = [];
  private readonly index = new Map<string, number>();
  of(s: string): number {
    let i = this.index.get(s);
    if (i === undefined) {
      i = this.list.length;
      this.list.push(s);
      this.index.set(s, i);
    }
    return i;
  }
}

function diagnosticData(d: Diagnostic, excludes: readonly string[]): DiagnosticData {
  const loc = d.loc && d.loc.frames.length ? userLocation(d.loc, excludes) : undefined;
  return { message: d.message, ...(loc ? { location: loc } : {}), notes: [...(d.notes ?? [])] };
}

function opName(op: Op): string {
  const names = op.results.map((r) => r.name).filter((n): n is string => !!n);
  if (names.length) return names.join(', ');
  const attr = op.attrs['name'];
  return typeof attr === 'string' ? attr : '';
}

function graphData(name: string, g: Graph, est: GraphEstimate, role: string, executions: number, strings: Strings, excludes: readonly string[]): GraphData {
  const index = new Map<Op, number>();
  g.ops.forEach((op, i) => index.set(op, i));
  const ops = g.ops.map((op, i): OpData => {
    const a = op.annotations;
    const inputs = [...new Set(op.operands.map((v) => index.get(v.producer)).filter((x): x is number => x !== undefined))];
    return {
      k: op.kind,
      n: opName(op),
      t: op.results.map((r) => formatType(r.type)).join(', '),
      l: strings.of(userLocation(op.loc, excludes)),
      ...(op.loc.frames.length > 1 ? { f: strings.of(op.loc.frames.map(frameLine).join('\n')) } : {}),
      s: strings.of(op.scope),
      ...(a.block !== undefined ? { b: a.block } : {}),
      ...(a.ipu !== undefined ? { ipu: a.ipu } : {}),
      ...(a.stage !== undefined ? { st: a.stage } : {}),
      ...(a.phase !== undefined ? { ph: a.phase } : {}),
      ...(a.recompute !== undefined ? { rc: a.recompute } : {}),
      i: inputs,
      c: est.byOp[i]!.cycles,
    };
  });
  return { name, role, executions, cycles: est.cycles, ops };
}

/** What each graph of the module is, for the graph picker. */
function graphRoles(m: Module, schedule: PipelineInfo | undefined): Map<string, string> {
  const roles = new Map<string, string>();
  for (const s of schedule?.stages ?? []) {
    const runs = s.kind === 'forward_backward' ? 'forward+backward' : s.kind;
    roles.set(s.graph, `${schedule?.schedule === 'sequential' ? 'phase' : 'stage'} ${s.index} on IPU ${s.ipu}, ${runs}`);
  }
  for (const name of m.graphs.keys()) {
    if (roles.has(name)) continue;
    roles.set(name, name === 'update' ? 'weight update (optimizer)' : name === 'step' ? 'one micro-batch: forward, backward, accumulation' : name === 'forward' ? 'forward (inference)' : 'graph');
  }
  return roles;
}

/**
 * Ops run one after another (a sharded graph): consecutive ops on one IPU make one segment.
 * Ops with no cycles (views, reads) do not split a segment.
 */
function sequentialSegments(name: string, g: Graph, est: GraphEstimate, start: number, scale: number, ipus: number, label: string): { segments: Segment[]; end: number } {
  const segments: Segment[] = [];
  let t = start;
  let cur: { ipu: number; start: number } | undefined;
  const close = () => {
    if (cur && t > cur.start) segments.push({ ipu: cur.ipu, start: cur.start, end: t, cat: 'graph', label, graph: name });
  };
  g.ops.forEach((op, i) => {
    const c = est.byOp[i]!.cycles * scale;
    if (c <= 0) return;
    const ipu = Math.min(ipus - 1, op.annotations.ipu ?? 0);
    if (!cur || cur.ipu !== ipu) {
      close();
      cur = { ipu, start: t };
    }
    t += c;
  });
  close();
  return { segments, end: t };
}

function pipelineTimeline(inp: ReportInputs, info: PipelineInfo, e: PipelineEstimate, ests: Map<string, GraphEstimate>): TimelineData {
  const segments: Segment[] = [];
  const bands: { label: string; kind: 'ramp-up' | 'main' | 'ramp-down' | 'update' | 'graph'; start: number; end: number }[] = [];
  const names = { fill: 'ramp-up', main: 'main', flush: 'ramp-down' } as const;
  const recompute = new Set(inp.scheduleSection?.stages.filter((s) => s.recompute).map((s) => s.index) ?? []);
  let t = 0;
  info.cycles.forEach((cy, i) => {
    const ce = e.cycles[i]!;
    const kind = names[cy.phase];
    const last = bands[bands.length - 1];
    if (last && last.kind === kind) last.end = t + ce.cycles;
    else bands.push({ label: kind, kind, start: t, end: t + ce.cycles });
    for (let ipu = 0; ipu < e.ipus; ipu++) {
      let at = t;
      for (const a of cy.stages) {
        const s = info.stages[a.stage]!;
        if (s.ipu !== ipu) continue;
        const len = e.stages[a.stage]!.cycles;
        const runs = s.kind === 'forward_backward' ? 'forward+backward' : s.kind;
        segments.push({ ipu, start: at, end: at + len, cat: runs, label: `${info.schedule === 'sequential' ? 'P' : 'S'}${s.index}·mb${a.microBatch}`, stage: s.index, microBatch: a.microBatch, graph: s.graph, ...(recompute.has(a.stage) ? { recompute: true as const } : {}) });
        at += len;
      }
      // stash pushes, restores and same-IPU copies of the cycle
      const busy = ce.perIpu[ipu] ?? 0;
      if (t + busy > at) segments.push({ ipu, start: at, end: t + busy, cat: 'exchange', label: 'stash / restore' });
      if (ce.copy > 0) segments.push({ ipu, start: t + ce.compute, end: t + ce.cycles, cat: 'copy', label: 'inter-IPU copy' });
    }
    t += ce.cycles;
  });
  // the graphs outside the pipeline (the optimizer), per loop, their ops one after another
  const counts = executionCounts(inp.module.program);
  const stageGraphs = new Set(info.stages.map((s) => s.graph));
  const loops = (counts.get(info.stages[0]?.graph ?? '') ?? 0) / Math.max(1, info.microBatches);
  const loopEnd = t;
  if (loops > 0) {
    for (const [name, times] of counts) {
      const g = inp.module.graphs.get(name);
      if (stageGraphs.has(name) || !g) continue;
      const r = sequentialSegments(name, g, ests.get(name)!, t, times / loops, e.ipus, name === 'update' ? 'weight update' : name);
      segments.push(...r.segments);
      t = r.end;
    }
  }
  if (t > loopEnd) bands.push({ label: 'weight update', kind: 'update', start: loopEnd, end: t });
  return { kind: info.schedule ?? 'pipelined', ipus: e.ipus, total: t, bands, segments, ...(inp.scheduleSection ? { pipeline: inp.scheduleSection } : {}) };
}

/** Without a pipeline: each graph the program runs, once, in program order, its ops one after another. */
function stepTimeline(inp: ReportInputs, ipus: number, ests: Map<string, GraphEstimate>): TimelineData {
  const segments: Segment[] = [];
  const bands: TimelineData['bands'][number][] = [];
  let t = 0;
  let runCycles = 0;
  for (const [name, times] of executionCounts(inp.module.program)) {
    const g = inp.module.graphs.get(name);
    if (!g) continue;
    const est = ests.get(name)!;
    runCycles += times * est.cycles;
    const r = sequentialSegments(name, g, est, t, 1, ipus, name);
    segments.push(...r.segments);
    bands.push({ label: times > 1 ? `${name} (×${times} per run)` : name, kind: 'graph', start: t, end: r.end });
    t = r.end;
  }
  return { kind: 'step', ipus, total: t, bands, segments, runCycles };
}

function tensorOf(b: PlannedAllocation, excludes: readonly string[]): TensorData {
  return { name: b.label, kind: b.kind, bytes: b.bytes, tiles: b.span.tilesUsed, ...(b.blame ? { op: b.blame.kind, location: userLocation(b.blame.loc, excludes) } : {}) };
}

function memoryData(inp: ReportInputs): MemoryData {
  const mem = inp.generated.plan.memory;
  const T = mem.tilesPerIpu;
  const tiles = tileUsage(inp.generated.allocations, mem.ipus, T);
  const perIpu = mem.perIpu.map((m): IpuMemoryData => {
    const u = tiles[m.ipu]!;
    const live = (ts: typeof m.largestLive) => ts.map((x) => ({ name: x.name, kind: x.kind, bytes: x.bytes, tileBytes: x.tileBytes, ...(x.op ? { op: x.op } : {}), ...(x.location ? { location: x.location } : {}) }));
    return {
      ipu: m.ipu,
      alwaysLiveBytes: m.alwaysLiveBytes,
      peakLiveBytes: m.peakLiveBytes,
      remoteBytes: m.remoteBytes,
      peakAt: m.peakAt,
      maxTile: m.maxTile - m.ipu * T,
      maxTileBytes: m.maxTileBytes,
      maxTileAlwaysLive: m.maxTileAlwaysLive,
      maxTileAt: m.maxTileAt,
      tilesAlwaysLive: Array.from(u.alwaysLive, Math.ceil),
      tilesPeak: Array.from(u.peak, Math.ceil),
      atPeak: u.peakBytes > 0 ? liveAt(inp.generated.allocations, m.ipu, u.peakTime, 12).map((b) => tensorOf(b, inp.excludes)) : [],
      fullestTileLive: live(m.largestLive),
      fullestTileAlwaysLive: live(m.largestAlwaysLive),
    };
  });
  const remote = inp.generated.plan.state.filter((s) => s.storage === 'off_chip').map((s) => ({ name: s.name, ipu: s.ipu, type: formatType({ dtype: s.dtype, shape: [...s.shape] }), bytes: s.bytes, role: s.role }));
  return { perIpu, remote };
}

/** The report's data from the built step and its generated program. */
export function reportData(inp: ReportInputs): ReportData {
  const m = inp.module;
  const mem = inp.generated.plan.memory;
  const strings = new Strings();
  const ests = new Map<string, GraphEstimate>();
  for (const [name, g] of m.graphs) ests.set(name, estimateGraphCycles(g, inp.costs));
  const counts = executionCounts(m.program);
  const roles = graphRoles(m, inp.schedule);
  const graphs = [...m.graphs].map(([name, g]) => graphData(name, g, ests.get(name)!, roles.get(name)!, counts.get(name) ?? 0, strings, inp.excludes));
  const ipus = Math.max(mem.ipus, inp.estimate?.ipus ?? 0);
  const timeline = inp.schedule && inp.estimate ? pipelineTimeline(inp, inp.schedule, inp.estimate, ests) : stepTimeline(inp, ipus, ests);
  return {
    version: 1,
    file: inp.file,
    module: m.name,
    pipeline: inp.pipeline,
    device: { ipus: mem.ipus, tilesPerIpu: mem.tilesPerIpu, bytesPerTile: mem.bytesPerTile, replicationFactor: m.replicationFactor, clockHz: inp.clockHz },
    fits: inp.generated.memoryProblems.length === 0,
    problems: inp.generated.memoryProblems.map((d) => diagnosticData(d, inp.excludes)),
    warnings: inp.warnings.map((d) => diagnosticData(d, inp.excludes)),
    strings: strings.list,
    graphs,
    timeline,
    memory: memoryData(inp),
    compile: { passes: inp.timings, loadAndPassesMs: inp.loadAndPassesMs, generateMs: inp.generateMs },
  };
}
