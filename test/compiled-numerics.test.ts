import { jest } from '@jest/globals';
import { GraphBuilder, Module, Tensor, collectVariables, execute, seq, streamIn } from '@tilegraph/ir';
import { CompiledBackend, ModuleInterpreter } from '@tilegraph/runtime';
import type { CompiledBackendOptions } from '@tilegraph/runtime';

/**
 * float16 numerics on the emulated IPU as the IPU computes them: matmuls sum in the partials type
 * (Precision.setPartialsType), half overflow gives infinity or, with floating-point exceptions on
 * (Precision.enableFloatingPointExceptions), stops the program, and stochastic rounding
 * (Precision.enableStochasticRounding) is unbiased and reproducible from the run seed. Expected
 * values come from the half rounding below, not from the code under test.
 */

jest.setTimeout(20 * 60 * 1000);

/** x rounded to the nearest half (ties to even); past 65504 it overflows to infinity. */
function halfRound(x: number): number {
  if (!Number.isFinite(x) || x === 0) return x;
  const a = Math.abs(x);
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e -= 1;
  if (2 ** (e + 1) <= a) e += 1;
  const spacing = 2 ** Math.max(e - 10, -24);
  const v = a / spacing;
  const f = Math.floor(v);
  const r = (v - f > 0.5 || (v - f === 0.5 && f % 2 === 1) ? f + 1 : f) * spacing;
  return Math.sign(x) * (r > 65504 ? Infinity : r);
}

function moduleOf(name: string, build: (b: GraphBuilder) => void, inputs: string[]): Module {
  const b = new GraphBuilder(name);
  build(b);
  const graphs = new Map([['forward', b.graph]]);
  return { name, graphs, program: seq(streamIn(inputs), execute('forward')), replicationFactor: 1, variables: collectVariables(graphs) };
}

/** Runs the module once on a fresh compiled backend (twice with runs = 2) and returns each run's outputs. */
function runCompiled(module: Module, feeds: Record<string, Tensor[]>, opts: CompiledBackendOptions & { seed?: number }, runs = 1): Record<string, number[]>[] {
  const backend = CompiledBackend.compile(module, { showProgress: false, ...opts });
  try {
    const out: Record<string, number[]>[] = [];
    for (let r = 0; r < runs; r++) {
      const res = backend.run(feeds);
      out.push(Object.fromEntries(Object.entries(res).map(([k, v]) => [k, Array.from(v[0]!.data)])));
    }
    return out;
  } finally {
    backend.dispose();
  }
}

const mean = (v: number[]): number => v.reduce((s, x) => s + x, 0) / v.length;

describe('partials type of a float16 matmul', () => {
  // a [2, K] x [K, 1]: a row of ones, and values in [0.5, 1) whose half sum drops low bits past 2048
  const K = 4096;
  const mixed = Array.from({ length: K }, (_, i) => halfRound(0.5 + ((i * 37) % 97) / 194));
  const module = moduleOf('dot', (b) => b.output('y', b.op('matmul', [b.input('a', 'float16', [2, K]), b.input('b', 'float16', [K, 1])])), ['a', 'b']);
  const feeds = { a: [Tensor.from('float16', [2, K], [...new Array<number>(K).fill(1), ...mixed])], b: [Tensor.from('float16', [K, 1], new Array<number>(K).fill(1))] };

  // float partials: float32 sums (a product of halves is exact in float), rounded to half at the end
  let floatSum = 0;
  let halfSum = 0;
  for (const p of mixed) {
    floatSum = Math.fround(floatSum + p);
    halfSum = halfRound(halfSum + p);
  }

  it('sums in float32 by default, like the reference on exact sums', () => {
    const [got] = runCompiled(module, feeds, {});
    expect(got!['y']).toEqual([4096, halfRound(floatSum)]);
    const want = new ModuleInterpreter(module).run(feeds)['y']![0]!;
    expect(want.data[0]).toBe(4096);
  });

  it('sums in half with setPartialsType(float16): each partial sum rounds to half', () => {
    const [got] = runCompiled(module, feeds, { partialsType: 'float16' });
    // 2048 + 1 ties between 2048 and 2050 and rounds to even: the sum of ones stops at 2048
    expect(got!['y']).toEqual([2048, halfSum]);
    expect(halfSum).not.toBe(halfRound(floatSum));
  });
});

describe('float16 overflow', () => {
  const module = moduleOf(
    'overflow',
    (b) => {
      b.output('cast', b.op('cast', [b.input('x', 'float32', [4])], { to: 'float16' }));
      b.output('mm', b.op('matmul', [b.input('p', 'float16', [1, 2]), b.input('q', 'float16', [2, 1])]));
    },
    ['x', 'p', 'q'],
  );
  const big = { x: [Tensor.from('float32', [4], [1e5, -7e4, 65519, 1.5])], p: [Tensor.from('float16', [1, 2], [300, 300])], q: [Tensor.from('float16', [2, 1], [300, 300])] };
  const small = { x: [Tensor.from('float32', [4], [1, -2, 3, 1.5])], p: [Tensor.from('float16', [1, 2], [3, 4])], q: [Tensor.from('float16', [2, 1], [5, 6])] };

  it('gives +-infinity when floating-point exceptions are off (the default)', () => {
    const [got] = runCompiled(module, big, {});
    expect(got!['cast']).toEqual([Infinity, -Infinity, 65504, 1.5]);
    expect(got!['mm']).toEqual([Infinity]);
  });

  it('stops the program with a floating-point exception when they are on', () => {
    expect(() => runCompiled(module, big, { floatingPointExceptions: true })).toThrow(/floating point exception \((invalid operation, )?overflow\)/);
  });

  it('does not trap ordinary values', () => {
    const [got] = runCompiled(module, small, { floatingPointExceptions: true });
    expect(got!['cast']).toEqual([1, -2, 3, 1.5]);
    expect(got!['mm']).toEqual([39]);
  });
});

describe('floating-point exceptions in a small network', () => {
  it('computes the same values as without them', () => {
    const module = moduleOf(
      'net',
      (b) => {
        const h = b.op('relu', [b.op('matmul', [b.input('x', 'float32', [4, 8]), b.input('w', 'float32', [8, 5])])]);
        const e = b.op('exp', [b.op('tanh', [h])]);
        const s = b.op('log', [b.op('div', [e, b.op('reduce_sum', [e], { axes: [1], keepdims: true })])]);
        b.output('y', b.op('reduce_sum', [b.op('mul', [s, b.op('sigmoid', [h])])], { axes: [1] }));
      },
      ['x', 'w'],
    );
    const v = (n: number, k: number) => Array.from({ length: n }, (_, i) => Math.sin(i * k) * 2);
    const feeds = { x: [Tensor.from('float32', [4, 8], v(32, 1.3))], w: [Tensor.from('float32', [8, 5], v(40, 0.7))] };
    const [plain] = runCompiled(module, feeds, {});
    const [trapping] = runCompiled(module, feeds, { floatingPointExceptions: true });
    expect(trapping).toEqual(plain);
  });
});

describe('stochastic rounding', () => {
  // 1 + 2^-12 lies a quarter of the way from 1 to the next half, 1 + 2^-10
  const N = 20000;
  const x = 1 + 2 ** -12;
  const up = 1 + 2 ** -10;
  const module = moduleOf(
    'sr',
    (b) => {
      b.output('cast', b.op('cast', [b.input('x', 'float32', [N])], { to: 'float16' }));
      b.output('mm', b.op('matmul', [b.input('p', 'float16', [N, 2]), b.input('q', 'float16', [2, 1])]));
    },
    ['x', 'p', 'q'],
  );
  const feeds = {
    x: [Tensor.from('float32', [N], new Array<number>(N).fill(x))],
    p: [Tensor.from('float16', [N, 2], new Array<number>(2 * N).fill(1))],
    q: [Tensor.from('float16', [2, 1], [1, 2 ** -12])],
  };

  it('rounds to nearest without it', () => {
    const [got] = runCompiled(module, feeds, { seed: 5 });
    expect(new Set(got!['cast'])).toEqual(new Set([1]));
    expect(new Set(got!['mm'])).toEqual(new Set([1]));
  });

  it('rounds to either neighbour, unbiased on average, reproducibly from the seed', () => {
    const [a, a2] = runCompiled(module, feeds, { stochasticRounding: true, seed: 5 }, 2);
    for (const name of ['cast', 'mm']) {
      const v = a![name]!;
      expect(new Set(v)).toEqual(new Set([1, up]));
      // within about 6 standard deviations of the mean, 2^-10 * sqrt(0.25 * 0.75 / N)
      expect(Math.abs(mean(v) - x)).toBeLessThan(2e-5);
      // the generators continue from run to run
      expect(a2![name]).not.toEqual(v);
    }
    const [again] = runCompiled(module, feeds, { stochasticRounding: true, seed: 5 });
    expect(again).toEqual(a);
    const [other] = runCompiled(module, feeds, { stochasticRounding: true, seed: 6 });
    expect(other!['cast']).not.toEqual(a!['cast']);
    expect(Math.abs(mean(other!['cast']!) - x)).toBeLessThan(2e-5);
  });
});
