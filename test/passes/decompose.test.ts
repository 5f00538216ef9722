import fc from 'fast-check';
import { GraphBuilder, Rng, Tensor, Value } from '@tilegraph/ir';
import { runGraph } from '@tilegraph/runtime';
import { DECOMPOSED_OPS, decomposeGraph } from '@tilegraph/passes';

/** Each decomposition computes what the composite op's kernel computes (up to float32 rounding). */

function randomTensor(rng: Rng, shape: number[], scale = 1): Tensor {
  const n = shape.reduce((a, d) => a * d, 1);
  return Tensor.from('float32', shape, Array.from({ length: n }, () => scale * rng.normal()));
}

type Case = { build: (b: GraphBuilder, feeds: Record<string, Tensor>, rng: Rng) => Value[] };

function input(b: GraphBuilder, feeds: Record<string, Tensor>, name: string, t: Tensor): Value {
  feeds[name] = t;
  return b.input(name, t.dtype, t.shape);
}

const cases: Record<string, (shape: number[], seed: number) => Case> = {
  softmax: (shape) => ({ build: (b, f, r) => [b.op('softmax', [input(b, f, 'x', randomTensor(r, shape, 5))], { axis: -1 })] }),
  log_softmax: (shape) => ({ build: (b, f, r) => [b.op('log_softmax', [input(b, f, 'x', randomTensor(r, shape, 5))], { axis: 0 })] }),
  layer_norm: (shape) => ({
    build: (b, f, r) => {
      const x = input(b, f, 'x', randomTensor(r, shape));
      const last = shape.slice(-1);
      return [b.op('layer_norm', [x, input(b, f, 's', randomTensor(r, last)), input(b, f, 'b', randomTensor(r, last))], { axis: -1 })];
    },
  }),
  group_norm: (shape) => ({
    build: (b, f, r) => {
      const s = [shape[0]!, 4, ...shape.slice(1)];
      const x = input(b, f, 'x', randomTensor(r, s));
      return [b.op('group_norm', [x, input(b, f, 's', randomTensor(r, [4])), input(b, f, 'b', randomTensor(r, [4]))], { num_groups: 2 })];
    },
  }),
  batch_norm: (shape) => ({
    build: (b, f, r) => {
      const s = [Math.max(shape[0]!, 2), 3, ...shape.slice(1)];
      const x = input(b, f, 'x', randomTensor(r, s));
      const ch = (n: string) => input(b, f, n, randomTensor(r, [3]));
      const v = input(b, f, 'v', Tensor.from('float32', [3], [0.5, 1, 2]));
      const train = b.ops('batch_norm', [x, ch('s'), ch('b'), ch('m'), v], { training: true });
      const infer = b.op('batch_norm', [x, ch('s2'), ch('b2'), ch('m2'), v], { training: false });
      return [...train, infer];
    },
  }),
  global_avg_pool: (shape) => ({ build: (b, f, r) => [b.op('global_avg_pool', [input(b, f, 'x', randomTensor(r, [2, 3, ...shape]))])] }),
  nll_loss: (shape, seed) => ({
    build: (b, f, r) => {
      const n = shape[0]!;
      const logp = input(b, f, 'x', randomTensor(r, [n, 5]));
      const t = input(b, f, 't', Tensor.from('int32', [n], Array.from({ length: n }, (_, i) => (i * 3 + seed) % 5)));
      const w = input(b, f, 'w', Tensor.from('float32', [5], [1, 2, 0.5, 1, 3]));
      return ['mean', 'sum', 'none'].flatMap((reduction) => [
        b.op('nll_loss', [logp, t], { reduction }),
        b.op('nll_loss', [logp, t, w], { reduction, ignore_index: seed % 5 === 0 ? 1 : 2 }),
      ]);
    },
  }),
  cross_entropy: (shape, seed) => ({
    build: (b, f, r) => {
      const n = shape[0]!;
      const logits = input(b, f, 'x', randomTensor(r, [n, 4, 2], 3));
      const t = input(b, f, 't', Tensor.from('int32', [n, 2], Array.from({ length: 2 * n }, (_, i) => (i + seed) % 4)));
      return [
        b.op('cross_entropy', [logits, t], { reduction: 'mean' }),
        b.op('cross_entropy', [logits, t], { reduction: 'none', label_smoothing: 0.1 }),
        b.op('cross_entropy', [logits, t, input(b, f, 'w', Tensor.from('float32', [4], [1, 2, 3, 4]))], { reduction: 'sum', label_smoothing: 0.2, ignore_index: 0 }),
      ];
    },
  }),
  identity_loss: (shape) => ({
    build: (b, f, r) => {
      const x = input(b, f, 'x', randomTensor(r, shape));
      return ['mean', 'sum', 'none'].map((reduction) => b.op('identity_loss', [x], { reduction }));
    },
  }),
};

describe('decompose', () => {
  it('has a test case for every decomposed op', () => {
    expect(Object.keys(cases).sort()).toEqual([...DECOMPOSED_OPS].sort());
  });

  for (const [name, make] of Object.entries(cases)) {
    it(`${name} matches the op's kernel`, () => {
      fc.assert(
        fc.property(fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 2, maxLength: 3 }), fc.integer({ min: 0, max: 1000 }), (shape, seed) => {
          const b = new GraphBuilder('g');
          const feeds: Record<string, Tensor> = {};
          const outs = make(shape, seed).build(b, feeds, new Rng(seed));
          outs.forEach((v, i) => b.output(`o${i}`, v));
          const d = decomposeGraph(b.graph);
          expect(d.ops.some((o) => o.kind === name)).toBe(false);
          const want = runGraph(b.graph, feeds).outputs;
          const got = runGraph(d, feeds).outputs;
          for (const [k, w] of Object.entries(want)) {
            const g = got[k]!;
            expect(g.shape).toEqual(w.shape);
            w.data.forEach((x, j) => {
              const y = g.data[j]!;
              if (Number.isNaN(x)) expect(Number.isNaN(y)).toBe(true);
              else expect(Math.abs(y - x)).toBeLessThanOrEqual(1e-5 + 1e-4 * Math.abs(x));
            });
          }
        }),
        { numRuns: 25 },
      );
    });
  }

  it("passes a training batch norm's statistics on to its gradient, computes them once, and dx from the gradient's sums", () => {
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 4 }), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 0, max: 1000 }), (n, c, seed) => {
        const rng = new Rng(seed);
        const b = new GraphBuilder('g');
        const feeds: Record<string, Tensor> = {};
        const shape = [n, c, 3];
        const x = input(b, feeds, 'x', randomTensor(rng, shape));
        const g = input(b, feeds, 'g', randomTensor(rng, shape));
        const ch = (name: string, scale = 1) => input(b, feeds, name, randomTensor(rng, [c], scale));
        const scale = ch('s');
        const [y] = b.ops('batch_norm', [x, scale, ch('b'), ch('m'), b.op('abs', [ch('v')])], { training: true, epsilon: 1e-3 });
        const grads = b.ops('batch_norm_grad', [g, x, scale], { epsilon: 1e-3 });
        // another epsilon: statistics of their own
        const other = b.ops('batch_norm_grad', [g, x, scale], { epsilon: 1e-2 });
        [y!, ...grads, ...other].forEach((v, i) => b.output(`o${i}`, v));
        const d = decomposeGraph(b.graph);
        const gradOps = d.ops.filter((o) => o.kind === 'batch_norm_grad');
        expect(gradOps.map((o) => o.operands.length)).toEqual([5, 3]);
        // with the statistics given, dx is element-wise ops on the op's channel sums: its own dx is unread
        expect(gradOps[0]!.results[0]!.uses).toHaveLength(0);
        expect(d.ops.filter((o) => o.kind === 'batch_norm_stats')).toHaveLength(1);
        const want = runGraph(b.graph, feeds).outputs;
        const got = runGraph(d, feeds).outputs;
        for (const [k, w] of Object.entries(want)) w.data.forEach((v, j) => expect(Math.abs(got[k]!.data[j]! - v)).toBeLessThanOrEqual(1e-5 + 1e-4 * Math.abs(v)));
      }),
      { numRuns: 25 },
    );
  });
});
