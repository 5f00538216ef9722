import { DiagnosticError, error } from '@tilegraph/ir';
import type { PerfCounters } from './format.js';

/** PopTorch's getPerfCounters(): per stream, the timestamps (seconds) of each of its copies in the last run. */
export interface PerfCounterLists {
  readonly input: number[][];
  readonly input_complete: number[][];
  readonly output: number[][];
  readonly output_complete: number[][];
}

/** A latency as PopTorch gives it: [minimum, maximum, mean] over the iterations of the last run, in seconds. */
export type LatencyStats = readonly [min: number, max: number, mean: number];

/** The perf counters as PopTorch returns them: an empty direction is [[]]. */
export function perfCounterLists(p: PerfCounters): PerfCounterLists {
  const norm = (lists: readonly (readonly number[])[]): number[][] => (lists.length ? lists.map((l) => [...l]) : [[]]);
  return { input: norm(p.input), input_complete: norm(p.input_complete), output: norm(p.output), output_complete: norm(p.output_complete) };
}

type Event = keyof PerfCounterLists;

/**
 * PopTorch's latency between two events: for each iteration, the `fromReduce` of the streams'
 * `from` timestamps and the `toReduce` of their `to` timestamps; when there are more starts than
 * ends (gradient accumulation, output modes), each end takes the minimum of its group of starts.
 * Returns [min, max, mean] of the durations, [0, 0, 0] when nothing was copied.
 */
export function latencyBetween(p: PerfCounterLists, from: Event, fromReduce: (xs: number[]) => number, to: Event, toReduce: (xs: number[]) => number): LatencyStats {
  const perIteration = (lists: number[][], reduce: (xs: number[]) => number): number[] => {
    const steps = lists[0]?.length ?? 0;
    const out: number[] = [];
    for (let k = 0; k < steps; k++) out.push(reduce(lists.map((l) => l[k]).filter((x): x is number => x !== undefined)));
    return out;
  };
  const starts = perIteration(p[from], fromReduce);
  const ends = perIteration(p[to], toReduce);
  if (ends.length === 0 || starts.length === 0) return [0, 0, 0];
  const factor = Math.floor(starts.length / ends.length);
  if (factor === 0 || starts.length % ends.length !== 0) {
    throw new DiagnosticError(error(`the last run has ${starts.length} '${from}' timestamps and ${ends.length} '${to}' timestamps: they cannot be paired into iterations`, undefined, ['getPerfCounters() gives the timestamps themselves']));
  }
  const durations = ends.map((end, i) => end - Math.min(...starts.slice(i * factor, (i + 1) * factor)));
  return [Math.min(...durations), Math.max(...durations), durations.reduce((a, b) => a + b, 0) / durations.length];
}

const min = (xs: number[]) => Math.min(...xs);
const max = (xs: number[]) => Math.max(...xs);

/** Round trip: the first input requested to the last output written back to the host. */
export function latency(p: PerfCounterLists): LatencyStats {
  return latencyBetween(p, 'input', min, 'output_complete', max);
}

/** Host to IPU: the first input requested to the last input transferred. */
export function hostIpuLatency(p: PerfCounterLists): LatencyStats {
  return latencyBetween(p, 'input', min, 'input_complete', max);
}

/** Compute: the last input transferred to the last output becoming available. */
export function computeLatency(p: PerfCounterLists): LatencyStats {
  return latencyBetween(p, 'input_complete', max, 'output', max);
}

/** IPU to host: the first output becoming available to the last output written back. */
export function ipuHostLatency(p: PerfCounterLists): LatencyStats {
  return latencyBetween(p, 'output', min, 'output_complete', max);
}
