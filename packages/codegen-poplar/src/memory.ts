import { Diagnostic, Location, Op, ProgramNode, error, numElements } from '@tilegraph/ir';
import type { ModuleContext } from './context.js';
import { deviceType } from './types.js';

/** The Mk2 GC200 IPU. */
export const GC200 = { tilesPerIpu: 1472, bytesPerTile: 638976, workersPerTile: 6 } as const;

/**
 * The linear tile mapping mapTensorLinearly(graph, t, minElementsPerTile, grain) produces: the
 * flattened tensor cut into equal runs of whole grains (at least minElementsPerTile elements),
 * placed on consecutive tiles.
 */
export function linearMapping(elements: number, tiles: number, grain: number, minElements: number): { perTile: number; tilesUsed: number } {
  if (elements === 0) return { perTile: 0, tilesUsed: 0 };
  const grains = Math.ceil(elements / grain);
  let perTile = Math.ceil(grains / tiles) * grain;
  perTile = Math.max(perTile, Math.ceil(minElements / grain) * grain);
  return { perTile, tilesUsed: Math.ceil(elements / perTile) };
}

/**
 * The first tile poplar-host's PopLibs emulation maps a result it creates on (a hash of the
 * shape, as poputil::chooseMappingOffset picks one): mirrored here so that the estimate places
 * PopLibs results where the emulated target does. FNV-1a over the dimensions.
 */
export function chooseMappingOffset(tiles: number, shape: readonly number[]): number {
  let h = 0x811c9dc5;
  for (const d of shape) {
    for (let k = 0; k < 4; k++) {
      h ^= Math.floor(d / 2 ** (8 * k)) & 0xff;
      h = Math.imul(h, 0x01000193) >>> 0;
    }
  }
  return h % tiles;
}

/** Where a tensor's elements live: `tilesUsed` consecutive tiles (mod the IPU's tiles) from `offset`. */
export interface TileSpan {
  readonly ipu: number;
  readonly offset: number;
  readonly perTile: number;
  readonly tilesUsed: number;
  readonly elements: number;
  readonly bytesPerElement: number;
}

/** Bytes of `span` on its i-th tile. */
function bytesOnTile(s: TileSpan, i: number): number {
  return Math.min(s.perTile, s.elements - i * s.perTile) * s.bytesPerElement;
}

/** `working`: the on-chip tensor of off-chip or transient state, live only from its load to its store. */
export type AllocationKind = 'state' | 'working' | 'input' | 'constant' | 'activation' | 'temporary' | 'vertices';

/**
 * One allocation of device memory: a tensor the program creates (or the vertex state of a compute
 * set). Always-live buffers (state, constants, vertex state) occupy their tiles for the whole
 * program; the others from their first to their last use, as Poplar's liveness analysis allots
 * not-always-live memory.
 */
export class Allocation {
  /** First and last time the program touches the buffer (global, set by the planner). */
  first = Infinity;
  last = -Infinity;
  constructor(
    readonly id: number,
    readonly kind: AllocationKind,
    readonly span: TileSpan,
    readonly label: string,
    readonly blame: Op | undefined,
    /** Extra per-tile bytes for vertex state: a flat count on each tile of the span. */
    readonly flatBytesPerTile = 0,
  ) {}

  get alwaysLive(): boolean {
    return this.kind === 'state' || this.kind === 'constant' || this.kind === 'vertices';
  }

  get bytes(): number {
    return this.flatBytesPerTile > 0 ? this.flatBytesPerTile * this.span.tilesUsed : this.span.elements * this.span.bytesPerElement;
  }

  /** Bytes on absolute tile `tile` of its IPU (0 when the span does not cover it). */
  bytesOn(tile: number, tilesPerIpu: number): number {
    const i = (tile - this.span.offset + tilesPerIpu) % tilesPerIpu;
    if (i >= this.span.tilesUsed) return 0;
    return this.flatBytesPerTile > 0 ? this.flatBytesPerTile : bytesOnTile(this.span, i);
  }

  /** Bytes on the i-th tile of its span. */
  bytesOnIth(i: number): number {
    return this.flatBytesPerTile > 0 ? this.flatBytesPerTile : bytesOnTile(this.span, i);
  }

  /** Adds its bytes, times `sign`, to each tile of `perTile` (indexed by the tiles of its IPU). */
  addTo(perTile: Float64Array, tilesPerIpu: number, sign: number): void {
    let tile = this.span.offset % tilesPerIpu;
    for (let i = 0; i < this.span.tilesUsed; i++) {
      perTile[tile]! += sign * this.bytesOnIth(i);
      if (++tile === tilesPerIpu) tile = 0;
    }
  }
}

/** A tensor live at the peak, as the planner reports it. */
export interface LiveTensor {
  readonly name: string;
  readonly kind: AllocationKind;
  /** Bytes on the fullest tile, and in all. */
  readonly tileBytes: number;
  readonly bytes: number;
  /** The op that made it, at the user's source line. */
  readonly op?: string;
  readonly location?: string;
}

/** Per-IPU figures of the memory plan. */
export interface IpuMemory {
  readonly ipu: number;
  /** Bytes live for the whole program (state, constants, vertex state), on all tiles. */
  readonly alwaysLiveBytes: number;
  /** The most not-always-live bytes live at one time, on all tiles, and where that is. */
  readonly peakLiveBytes: number;
  /** Bytes per replica in remote buffers (streaming memory, off the tiles): off-chip state. */
  readonly remoteBytes: number;
  readonly peakAt: string;
  /** The fullest tile (absolute index), its bytes (always-live plus its own peak), and where that peak is. */
  readonly maxTile: number;
  readonly maxTileBytes: number;
  readonly maxTileAlwaysLive: number;
  readonly maxTileAt: string;
  /** The largest not-always-live tensors on the fullest tile at its peak, largest first. */
  readonly largestLive: readonly LiveTensor[];
  /** The largest always-live tensors on the fullest tile. */
  readonly largestAlwaysLive: readonly LiveTensor[];
  /** With IO tiles: bytes on the fullest IO tile (the buffers of overlapped streams and staged remote transfers). */
  readonly ioTileBytes?: number;
}

/** Per-tile byte counts of the tensors and vertices a generated program allocates, over time. */
export interface MemoryReport {
  readonly ipus: number;
  /** Compute tiles per IPU (with IO tiles set aside, the IPU's tiles less those). */
  readonly tilesPerIpu: number;
  /** Tiles per IPU set aside for IO (TensorLocations.numIOTiles), after the compute tiles. */
  readonly ioTilesPerIpu: number;
  readonly bytesPerTile: number;
  /** Largest per-tile total and where it is. */
  readonly maxTileBytes: number;
  readonly maxTile: number;
  /** Bytes of every allocation, as if all were live at once. */
  readonly totalBytes: number;
  readonly perIpu: readonly IpuMemory[];
}

/** A point in the program: a time of the planner and what runs then. */
export interface ProgramPoint {
  readonly describe: string;
  readonly op?: Op;
}

/**
 * Collects the program's allocations with their tile spans while the code is generated, then
 * sweeps their live ranges to find each tile's peak. Small tensors start where the previous one
 * on that IPU ended (PopLibs' mapTensorLinearlyWithOffset), so they spread over all tiles instead
 * of piling up on the first ones.
 */
export class MemoryPlanner {
  readonly buffers: Allocation[] = [];
  private readonly cursor: number[];
  private readonly remote: number[];

  constructor(
    readonly ipus: number,
    readonly tilesPerIpu: number = GC200.tilesPerIpu,
    readonly bytesPerTile: number = GC200.bytesPerTile,
    readonly ioTilesPerIpu = 0,
  ) {
    this.cursor = new Array<number>(ipus).fill(0);
    this.remote = new Array<number>(ipus).fill(0);
  }

  /** Counts a remote buffer of the IPU (off the tiles: never in a tile's figure). */
  addRemote(ipu: number, bytes: number): void {
    this.remote[ipu]! += bytes;
  }

  /** The start tile for a new tensor of `tilesUsed` tiles on `ipu`; advances the IPU's cursor. */
  nextOffset(ipu: number, tilesUsed: number): number {
    const at = this.cursor[ipu]!;
    this.cursor[ipu] = (at + tilesUsed) % this.tilesPerIpu;
    return at;
  }

  /** A tensor mapped linearly from `offset` (default: the IPU's cursor). */
  addLinear(kind: AllocationKind, ipu: number, elements: number, bytesPerElement: number, grain: number, minElements: number, blame: Op | undefined, label: string, offset?: number): Allocation {
    const { perTile, tilesUsed } = linearMapping(elements, this.tilesPerIpu, grain, minElements);
    const at = offset ?? this.nextOffset(ipu, tilesUsed);
    return this.push(kind, { ipu, offset: at, perTile, tilesUsed, elements, bytesPerElement }, blame, label);
  }

  /** A tensor with a given tile span (mapped like another tensor). */
  addSpan(kind: AllocationKind, span: TileSpan, blame: Op | undefined, label: string): Allocation {
    return this.push(kind, span, blame, label);
  }

  /** Bytes on one tile (a scalar constant). */
  addTile(kind: AllocationKind, ipu: number, tile: number, bytes: number, blame: Op | undefined, label: string): Allocation {
    return this.push(kind, { ipu, offset: tile, perTile: 1, tilesUsed: 1, elements: 1, bytesPerElement: bytes }, blame, label);
  }

  /** Vertex state: about `bytesEach` bytes on each of `tilesUsed` tiles from `offset`. */
  addVertices(ipu: number, offset: number, tilesUsed: number, bytesEach: number, blame: Op | undefined): void {
    const b = new Allocation(this.buffers.length, 'vertices', { ipu, offset, perTile: 0, tilesUsed: Math.min(tilesUsed, this.tilesPerIpu), elements: 0, bytesPerElement: 0 }, 'vertex state', blame, bytesEach);
    this.buffers.push(b);
  }

  /** The same memory on `ipu` (an outlined function built there too, or called again), made by `blame`. */
  duplicate(b: Allocation, ipu: number, blame = b.blame, label = b.label): Allocation {
    const copy = new Allocation(this.buffers.length, b.kind, { ...b.span, ipu }, label, blame, b.flatBytesPerTile);
    this.buffers.push(copy);
    return copy;
  }

  private push(kind: AllocationKind, span: TileSpan, blame: Op | undefined, label: string): Allocation {
    const b = new Allocation(this.buffers.length, kind, span, label, blame);
    this.buffers.push(b);
    return b;
  }

  /**
   * Sweeps the live ranges (set on each buffer by the caller) and returns per-IPU figures.
   * `at(t)` describes time t; `repeats` are the time ranges of loops: a buffer live across a
   * loop's start or end is live for the whole loop (its value is carried round).
   */
  plan(at: (t: number) => ProgramPoint, repeats: readonly (readonly [number, number])[], locate: (op: Op) => string): { report: MemoryReport; maxTileTimes: (number | undefined)[] } {
    const T = this.tilesPerIpu;
    const live = this.buffers.filter((b) => !b.alwaysLive && b.span.tilesUsed > 0);
    for (const b of live) {
      if (b.first > b.last) b.first = b.last = 0; // made but never used: live where it was made
      extendOverLoops(b, repeats);
    }
    const { always, peak, peakTime, peakTotal, peakTotalTime } = sweepTiles(this.buffers, this.ipus, T);

    const perIpu: IpuMemory[] = [];
    const maxTileTimes: (number | undefined)[] = [];
    let maxTileBytes = 0;
    let maxTile = 0;
    for (let ipu = 0; ipu < this.ipus; ipu++) {
      let best = 0;
      for (let t = 1; t < T; t++) if (always[ipu]![t]! + peak[ipu]![t]! > always[ipu]![best]! + peak[ipu]![best]!) best = t;
      const bytes = always[ipu]![best]! + peak[ipu]![best]!;
      const time = peakTime[ipu]![best]!;
      maxTileTimes.push(peak[ipu]![best]! > 0 ? time : undefined);
      const onTile = (always: boolean) =>
        this.buffers
          .filter((b) => b.span.ipu === ipu && b.kind !== 'vertices' && (always ? b.alwaysLive : !b.alwaysLive && b.first <= time && time <= b.last))
          .map((b) => ({ b, n: b.bytesOn(best, T) }))
          .filter((x) => x.n > 0)
          .sort((a, b) => b.n - a.n || b.b.bytes - a.b.bytes)
          .slice(0, 8)
          .map(({ b, n }) => ({
            name: b.label,
            kind: b.kind,
            tileBytes: Math.ceil(n),
            bytes: b.bytes,
            ...(b.blame ? { op: b.blame.kind, location: locate(b.blame) } : {}),
          }));
      perIpu.push({
        ipu,
        alwaysLiveBytes: always[ipu]!.reduce((s, x) => s + x, 0),
        peakLiveBytes: peakTotal[ipu]!,
        remoteBytes: this.remote[ipu]!,
        peakAt: at(peakTotalTime[ipu]!).describe,
        maxTile: ipu * T + best,
        maxTileBytes: Math.ceil(bytes),
        maxTileAlwaysLive: Math.ceil(always[ipu]![best]!),
        maxTileAt: peak[ipu]![best]! > 0 ? at(time).describe : 'the whole program (always-live memory)',
        largestLive: onTile(false),
        largestAlwaysLive: onTile(true),
      });
      if (bytes > maxTileBytes) {
        maxTileBytes = bytes;
        maxTile = ipu * T + best;
      }
    }
    const report: MemoryReport = {
      ipus: this.ipus,
      tilesPerIpu: T,
      ioTilesPerIpu: this.ioTilesPerIpu,
      bytesPerTile: this.bytesPerTile,
      maxTileBytes: Math.ceil(maxTileBytes),
      maxTile,
      totalBytes: this.buffers.reduce((s, b) => s + b.bytes, 0),
      perIpu,
    };
    return { report, maxTileTimes };
  }
}

/** A buffer live across the start or the end of a loop is live for all of it. */
function extendOverLoops(b: Allocation, repeats: readonly (readonly [number, number])[]): void {
  for (let changed = true; changed; ) {
    changed = false;
    for (const [s, e] of repeats) {
      const inside = (t: number) => s <= t && t <= e;
      if (b.first < s && inside(b.last) && b.last !== e) {
        b.last = e;
        changed = true;
      } else if (b.last > e && inside(b.first) && b.first !== s) {
        b.first = s;
        changed = true;
      }
    }
  }
}

export function formatBytes(n: number): string {
  if (n >= 2 ** 30) return `${(n / 2 ** 30).toFixed(2)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  if (n >= 2 ** 10) return `${(n / 2 ** 10).toFixed(1)} KiB`;
  return `${n} bytes`;
}

/**
 * The most bytes one run may stream each way (all inputs to the device, all outputs from it, over
 * its batches and replicas). The runtime carries a run's outputs back as one host buffer and each
 * input as one; 2 GiB keeps each, and the copies made of it, within what Node.js buffers and 32-bit
 * offsets address. Tile memory says nothing about this: a broadcast output takes no tile memory.
 */
export const MAX_STREAM_BYTES_PER_RUN = 2 ** 31 - 1;

/** Times each stream is copied and each graph executed in one run of `p`. */
export function runsOf(p: ProgramNode, mult: number, streams: Map<string, number>, executes: Map<string, number>): void {
  switch (p.kind) {
    case 'sequence':
      for (const b of p.body) runsOf(b, mult, streams, executes);
      return;
    case 'repeat':
      runsOf(p.body, mult * p.count, streams, executes);
      return;
    case 'execute':
      executes.set(p.graph, (executes.get(p.graph) ?? 0) + mult);
      return;
    case 'stream_in':
    case 'io_stream_in':
      for (const s of p.inputs) streams.set(s, (streams.get(s) ?? 0) + mult);
      return;
    default:
      return;
  }
}

/**
 * The streams of one run against MAX_STREAM_BYTES_PER_RUN: a diagnostic per direction that is
 * over, at the largest tensor streamed that way, naming it and its size. `locate` gives the
 * user's location of the op that makes a tensor.
 */
export function streamProblems(mc: ModuleContext, locate: (op: Op) => Location): Diagnostic[] {
  const m = mc.module;
  const R = m.replicationFactor;
  const streams = new Map<string, number>();
  const executes = new Map<string, number>();
  runsOf(m.program, 1, streams, executes);
  const bytes = (dtype: Parameters<typeof deviceType>[0], shape: readonly number[]) => numElements(shape) * deviceType(dtype).bytes;
  const opOf = (input: boolean, name: string): Op | undefined => {
    for (const g of m.graphs.values()) {
      if (input) {
        const op = g.ops.find((o) => o.kind === 'input' && o.attrs['name'] === name);
        if (op) return op;
      } else {
        const out = g.outputs.find((o) => o.name === name);
        if (out) return out.value.producer;
      }
    }
    return undefined;
  };
  type Stream = { name: string; each: number; runs: number; total: number; op: Op | undefined };
  const inputs: Stream[] = mc.inputs.map((s) => {
    const runs = (streams.get(s.name) ?? 0) * R;
    const each = bytes(s.dtype, s.shape);
    return { name: s.name, each, runs, total: each * runs, op: opOf(true, s.name) };
  });
  const outputs: Stream[] = mc.outputs
    .filter((o) => o.kind === 'output')
    .map((o) => {
      let runs = 0;
      for (const [name, g] of m.graphs) if (g.outputs.some((x) => x.name === o.name)) runs += executes.get(name) ?? 0;
      runs *= R;
      const each = bytes(o.dtype, o.shape);
      return { name: o.name, each, runs, total: each * runs, op: opOf(false, o.name) };
    });
  const ds: Diagnostic[] = [];
  for (const [what, list] of [['input', inputs], ['output', outputs]] as const) {
    const all = list.reduce((n, s) => n + s.total, 0);
    if (all <= MAX_STREAM_BYTES_PER_RUN) continue;
    const largest = [...list].sort((a, b) => b.total - a.total);
    const top = largest[0]!;
    const times = top.runs > 1 ? ` (${formatBytes(top.each)} × ${top.runs} copies: batches per run × replicas)` : '';
    const notes = [
      ...(all > top.total ? [`a run streams ${formatBytes(all)} of ${what}s ${what === 'input' ? 'to' : 'from'} the device in all`] : []),
      ...largest.slice(1, 4).filter((s) => s.total > 0).map((s) => `also streamed: ${what} '${s.name}', ${formatBytes(s.total)}`),
      top.runs > 1 ? 'stream fewer batches per run (deviceIterations, gradient accumulation) or make the tensor smaller' : `make the ${what} smaller${what === 'output' ? ', or reduce it on the device (e.g. reduce_sum) before it is an output' : ''}`,
    ];
    ds.push(error(`${what} '${top.name}' streams ${formatBytes(top.total)} per run${times}, more than the ${formatBytes(MAX_STREAM_BYTES_PER_RUN + 1)} a run may stream ${what === 'input' ? 'to' : 'from'} the device`, top.op ? locate(top.op) : undefined, notes));
  }
  return ds;
}

/** Per-tile and per-IPU peaks of a set of planned allocations. */
export interface TileSweep {
  /** Always-live bytes per tile, per IPU. */
  readonly always: Float64Array[];
  /** The most not-always-live bytes live at once on each tile, and when. */
  readonly peak: Float64Array[];
  readonly peakTime: Float64Array[];
  /** The most not-always-live bytes live at once on each IPU (all tiles), and when. */
  readonly peakTotal: Float64Array;
  readonly peakTotalTime: Float64Array;
}

/**
 * Sweeps the live ranges of planned allocations (set by the planner, loops included): each is
 * allocated at its first use and released after its last. The planner and per-tile reports share it.
 */
export function sweepTiles(buffers: readonly Allocation[], ipus: number, T: number): TileSweep {
  const live = buffers.filter((b) => !b.alwaysLive && b.span.tilesUsed > 0 && b.span.ipu < ipus);
  const always = Array.from({ length: ipus }, () => new Float64Array(T));
  for (const b of buffers) if (b.alwaysLive && b.span.ipu < ipus) b.addTo(always[b.span.ipu]!, T, 1);

  // sweep: allocations at `first`, releases after `last`
  const starts = [...live].sort((a, b) => a.first - b.first || a.id - b.id);
  const ends = [...live].sort((a, b) => a.last - b.last || a.id - b.id);
  const cur = Array.from({ length: ipus }, () => new Float64Array(T));
  const peak = Array.from({ length: ipus }, () => new Float64Array(T));
  const peakTime = Array.from({ length: ipus }, () => new Float64Array(T));
  const total = new Float64Array(ipus);
  const peakTotal = new Float64Array(ipus);
  const peakTotalTime = new Float64Array(ipus);
  let i = 0;
  let j = 0;
  while (i < starts.length) {
    const t = starts[i]!.first;
    while (j < ends.length && ends[j]!.last < t) {
      const b = ends[j++]!;
      b.addTo(cur[b.span.ipu]!, T, -1);
      total[b.span.ipu]! -= b.bytes;
    }
    for (; i < starts.length && starts[i]!.first === t; i++) {
      const b = starts[i]!;
      const ipu = b.span.ipu;
      const c = cur[ipu]!;
      const p = peak[ipu]!;
      const pt = peakTime[ipu]!;
      // (a loop rather than a callback per tile: a large model has millions of allocation tiles)
      let tile = b.span.offset % T;
      for (let k = 0; k < b.span.tilesUsed; k++) {
        c[tile]! += b.bytesOnIth(k);
        if (c[tile]! > p[tile]!) {
          p[tile] = c[tile]!;
          pt[tile] = t;
        }
        if (++tile === T) tile = 0;
      }
      total[ipu]! += b.bytes;
      if (total[ipu]! > peakTotal[ipu]!) {
        peakTotal[ipu] = total[ipu]!;
        peakTotalTime[ipu] = t;
      }
    }
  }
  return { always, peak, peakTime, peakTotal, peakTotalTime };
}
