import { expect } from '@jest/globals';
import { Module, Tensor } from '@tilegraph/ir';
import { CompiledBackend, CompiledBackendOptions } from '@tilegraph/runtime';
import { sameBits } from './trainable.js';

/**
 * Compiles `module` twice, with the options `a` and `b` (each on top of seed 3, no progress), runs
 * both `runs` times on `feeds(run)`, and expects every output and every variable the same bits.
 */
export function expectSameRuns(module: Module, a: CompiledBackendOptions, b: CompiledBackendOptions, runs: number, feeds: (run: number) => Record<string, Tensor[]>): void {
  const first = CompiledBackend.compile(module, { seed: 3, showProgress: false, ...a });
  const second = CompiledBackend.compile(module, { seed: 3, showProgress: false, ...b });
  const problems: string[] = [];
  try {
    for (let run = 0; run < runs; run++) {
      const f = feeds(run);
      const got = first.run(f);
      const want = second.run(f);
      for (const [name, ts] of Object.entries(want)) ts.forEach((t, k) => sameBits(got[name]![k]!, t) || problems.push(`run ${run} ${name}#${k}`));
      for (const name of module.variables.keys()) {
        const firstState = first.read(name);
        second.read(name).forEach((t, r) => sameBits(firstState[r]!, t) || problems.push(`run ${run} ${name}@${r}`));
      }
    }
  } finally {
    first.dispose();
    second.dispose();
  }
  expect(problems).toEqual([]);
}
