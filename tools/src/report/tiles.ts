import { GeneratedSources, sweepTiles } from '@tilegraph/codegen-poplar';

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
 * allocations (their live ranges as the planner left them, loops included), by the planner's own
 * sweep, which reports only the fullest tile.
 */
export function tileUsage(allocations: readonly PlannedAllocation[], ipus: number, tilesPerIpu: number): IpuTiles[] {
  const s = sweepTiles(allocations, ipus, tilesPerIpu);
  return Array.from({ length: ipus }, (_, ipu) => ({ ipu, alwaysLive: s.always[ipu]!, peak: s.peak[ipu]!, peakTime: s.peakTotalTime[ipu]!, peakBytes: s.peakTotal[ipu]! }));
}

/** The not-always-live allocations of an IPU live at planner time `t`, largest first. */
export function liveAt(allocations: readonly PlannedAllocation[], ipu: number, t: number, limit: number): PlannedAllocation[] {
  return allocations
    .filter((b) => b.span.ipu === ipu && !b.alwaysLive && b.kind !== 'vertices' && b.span.tilesUsed > 0 && b.first <= t && t <= b.last)
    .sort((a, b) => b.bytes - a.bytes || a.id - b.id)
    .slice(0, limit);
}
