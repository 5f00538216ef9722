import { jest } from '@jest/globals';
import { Tensor, isFloat } from '@tilegraph/ir';
import { CompiledBackend, ModuleInterpreter } from '@tilegraph/runtime';
import { targetedModule } from './support/poplar-api-cases.js';

/**
 * The models behind the Poplar API check's fixes (empty bool reductions, unsigned sums and
 * products, rank-3 scatter_add, half and bool MultiVertex outputs, random ops over many tiles),
 * compiled for poplar-host and compared with the reference over two runs (the random streams
 * advance): integers, bools and random draws bit for bit, other floats within rounding.
 */

jest.setTimeout(20 * 60 * 1000);

const SEED = 5;

function difference(name: string, got: Tensor | undefined, want: Tensor, exact: boolean): string | undefined {
  if (!got) return `${name}: missing`;
  if (got.dtype !== want.dtype || got.shape.join() !== want.shape.join()) return `${name}: ${got.dtype}[${got.shape}], want ${want.dtype}[${want.shape}]`;
  const [rtol, atol] = want.dtype === 'float16' ? [2e-3, 1e-3] : [2e-5, 1e-6];
  for (let i = 0; i < want.size; i++) {
    const a = got.data[i]!;
    const b = want.data[i]!;
    if (Object.is(a, b) || (Number.isNaN(a) && Number.isNaN(b))) continue;
    if (!exact && isFloat(want.dtype) && Math.abs(a - b) <= atol + rtol * Math.abs(b)) continue;
    return `${name}[${i}]: got ${a}, want ${b}`;
  }
  return undefined;
}

describe('targeted models of the Poplar API fixes on the compiled backend match the reference', () => {
  const { module, feeds, exact } = targetedModule();
  const runs: { got: Record<string, Tensor[]>; want: Record<string, Tensor[]> }[] = [];
  beforeAll(() => {
    const reference = new ModuleInterpreter(module, { seed: SEED, print: () => {} });
    const backend = CompiledBackend.compile(module, { seed: SEED, print: () => {}, showProgress: false });
    try {
      for (const run of [0, 1]) {
        const f = Object.fromEntries(Object.entries(feeds).map(([k, ts]) => [k, [ts[run]!]]));
        runs.push({ got: backend.run(f), want: reference.run(f) });
      }
    } finally {
      backend.dispose();
    }
  });

  const names = module.graphs.get([...module.graphs.keys()][0]!)!.outputs.map((o) => o.name);
  test.each(names.map((n) => [n] as const))('%s', (name) => {
    const problems = runs.map((r, k) => difference(`${name} (run ${k})`, r.got[name]?.[0], r.want[name]![0]!, exact.has(name))).filter((p) => p !== undefined);
    expect(problems).toEqual([]);
  });

  test('random draws change from run to run and empty reductions give the identities', () => {
    const [a, b] = runs.map((r) => r.want['rnd.uniform']![0]!);
    expect(a!.data.some((v, i) => v !== b!.data[i])).toBe(true);
    expect(Array.from(runs[0]!.got['empty.any']![0]!.data)).toEqual([0, 0, 0]);
    expect(Array.from(runs[0]!.got['empty.all']![0]!.data)).toEqual([1, 1, 1]);
    // 3e9 + 1.5e9 + 7 and 2^31 + 2^31 - 1 + 5 wrap modulo 2^32
    expect(Array.from(runs[0]!.got['uint.sum_big']![0]!.data)).toEqual([(4.5e9 + 7) % 2 ** 32, 4, (8e9 + 1) % 2 ** 32, 6]);
  });
});
