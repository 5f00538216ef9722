import { GeneratedSources } from '@tilegraph/codegen-poplar';

/** One planned allocation: a tensor's (or a compute set's vertex state's) tile span and live range. */
export type PlannedAllocation = GeneratedSources['allocations'][number];

/** Per-tile figures of one IPU: always-live bytes and the peak of the rest, tile by tile. */
export interface IpuTiles {
  readonly ipu: number;
  readonly alwaysLive: Float64Array;
  readonly peak: Float64Array;
  /** The planner time at which the IPU's not-always-live bytes (all tiles) peak. */
  readonly peakTime: number;
  readonly peakBytes: number;
}

/**
 * Each tile's always-live bytes and the peak of its not-always-live bytes, from the planned
 * allocations (their live ranges as the planner left them, loops included). The same sweep as the
 * planner's, which reports only the fullest tile: allocations at their first use, released after
 * their last.
 */
export function tileUsage(allocations: readonly PlannedAllocation[], ipus: number, tilesPerIpu: number): IpuTiles[] {
  const always = Array.from({ length: ipus }, () => new Float64Array(tilesPerIpu));
  const cur = Array.from({ length: ipus }, () => new Float64Array(tilesPerIpu));
  const peak = Array.from({ length: ipus }, () => new Float64Array(tilesPerIpu));
  const total = new Float64Array(ipus);
  const peakTotal = new Float64Array(ipus);
  const peakTime = new Float64Array(ipus);
  const live: PlannedAllocation[] = [];
  for (const b of allocations) {
    if (b.span.ipu >= ipus) continue;
    if (b.alwaysLive) b.forEachTile(tilesPerIpu, (t, n) => (always[b.span.ipu]![t]! += n));
    else if (b.span.tilesUsed > 0 && b.first <= b.last) live.push(b);
  }
  const starts = [...live].sort((a, b) => a.first - b.first || a.id - b.id);
  const ends = [...live].sort((a, b) => a.last - b.last || a.id - b.id);
  let i = 0;
  let j = 0;
  while (i < starts.length) {
    const t = starts[i]!.first;
    while (j < ends.length && ends[j]!.last < t) {
      const b = ends[j++]!;
      const c = cur[b.span.ipu]!;
      b.forEachTile(tilesPerIpu, (tile, n) => (c[tile]! -= n));
      total[b.span.ipu]! -= b.bytes;
    }
    for (; i < starts.length && starts[i]!.first === t; i++) {
      const b = starts[i]!;
      const ipu = b.span.ipu;
      const c = cur[ipu]!;
      const p = peak[ipu]!;
      b.forEachTile(tilesPerIpu, (tile, n) => {
        c[tile]! += n;
        if (c[tile]! > p[tile]!) p[tile] = c[tile]!;
      });
      total[ipu]! += b.bytes;
      if (total[ipu]! > peakTotal[ipu]!) {
        peakTotal[ipu] = total[ipu]!;
        peakTime[ipu] = t;
      }
    }
  }
  return Array.from({ length: ipus }, (_, ipu) => ({ ipu, alwaysLive: always[ipu]!, peak: peak[ipu]!, peakTime: peakTime[ipu]!, peakBytes: peakTotal[ipu]! }));
}

/** The not-always-live allocations of an IPU live at planner time `t`, largest first. */
export function liveAt(allocations: readonly PlannedAllocation[], ipu: number, t: number, limit: number): PlannedAllocation[] {
  return allocations
    .filter((b) => b.span.ipu === ipu && !b.alwaysLive && b.kind !== 'vertices' && b.span.tilesUsed > 0 && b.first <= t && t <= b.last)
    .sort((a, b) => b.bytes - a.bytes || a.id - b.id)
    .slice(0, limit);
}
