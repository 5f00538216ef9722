/**
 * Throughput over repeated timing windows. Each window is timed on its own and gives one sample
 * (samples per second), so a benchmark reports the median of the windows and their range rather
 * than one long average. Contenders take turns window by window — A B C, B C A, C A B, ... — so
 * that a change in the machine's load during the run falls on all of them alike.
 */

export interface Contender {
  readonly name: string;
  /** Runs whole calls for at least `seconds` (at least one call); returns samples per second. */
  window(seconds: number): Promise<number>;
}

/** A contender in this process: `call` processes `samplesPerCall` samples (warm it up first). */
export function inProcess(name: string, samplesPerCall: number, call: () => unknown): Contender {
  return {
    name,
    async window(seconds) {
      let calls = 0;
      const t0 = performance.now();
      let elapsed: number;
      do {
        await call();
        calls++;
        elapsed = (performance.now() - t0) / 1000;
      } while (elapsed < seconds);
      return (calls * samplesPerCall) / elapsed;
    },
  };
}

/** `windows` windows of `seconds` for each contender, in rotating order: samples per second by name. */
export async function interleavedWindows(contenders: readonly Contender[], windows: number, seconds: number): Promise<Map<string, number[]>> {
  const rates = new Map(contenders.map((c) => [c.name, [] as number[]]));
  for (let w = 0; w < windows; w++) {
    for (let k = 0; k < contenders.length; k++) {
      const c = contenders[(w + k) % contenders.length]!;
      rates.get(c.name)!.push(await c.window(seconds));
    }
  }
  return rates;
}
