/**
 * Gradient rules of the compute ops (element-wise, matmul, conv, pools, norms, softmax, losses)
 * against central finite differences in float64. Generated values stay away from the points
 * where an op is not differentiable (kinks, jumps, ties of a max pool).
 */
import fc from 'fast-check';
import { Tensor, numElements } from '@tilegraph/ir';
import { GradCheckOptions, expectGradOk, f64 } from '../support/gradcheck.js';
import { accepts, forward } from '../support/op-run.js';

type Attrs = Record<string, unknown>;

const RUNS = { numRuns: 15 };

// ---- arbitraries ----

const dim = (max = 3) => fc.integer({ min: 1, max });
const shapeArb = (minRank: number, maxRank: number, maxDim = 3) => fc.array(dim(maxDim), { minLength: minRank, maxLength: maxRank });

/** Values in [lo, hi] on a grid of 1/64 plus a fixed irrational offset, so generated values are never exactly 0 or integers. */
const value = (lo = -2, hi = 2) => fc.integer({ min: Math.ceil(lo * 64), max: Math.floor(hi * 64) - 1 }).map((i) => (i + 0.3183) / 64);
/** Values with |v| in [gap, hi]: away from 0. */
const awayFromZero = (gap = 0.1, hi = 2) => fc.tuple(fc.boolean(), value(gap, hi)).map(([neg, v]) => (neg ? -v : v));

function tensorArb(shape: readonly number[], v: fc.Arbitrary<number> = value()): fc.Arbitrary<Tensor> {
  const n = numElements(shape);
  return fc.array(v, { minLength: n, maxLength: n }).map((xs) => f64(shape, xs));
}

/** Pairwise distinct values (steps of 1/16 apart): no ties in a max, no degenerate variance. */
function distinctTensorArb(shape: readonly number[], spread = 4): fc.Arbitrary<Tensor> {
  const n = numElements(shape);
  return fc
    .uniqueArray(fc.integer({ min: -spread * 16, max: spread * 16 }), { minLength: n, maxLength: n })
    .map((xs) => f64(shape, xs.map((i) => (i + 0.21) / 16)));
}

/** A shape that broadcasts to `full`: some leading dims dropped, some dims set to 1. */
function broadcastFrom(full: readonly number[]): fc.Arbitrary<number[]> {
  return fc
    .tuple(fc.integer({ min: 0, max: full.length }), fc.array(fc.boolean(), { minLength: full.length, maxLength: full.length }))
    .map(([drop, ones]) => full.slice(drop).map((d, i) => (ones[i + drop] ? 1 : d)));
}

/** Two shapes broadcasting against each other (each derived from a common full shape). */
const broadcastPair = shapeArb(0, 3).chain((full) => fc.tuple(broadcastFrom(full), broadcastFrom(full)));

// ---- element-wise ----

describe('element-wise gradients', () => {
  const binaryCases: [string, fc.Arbitrary<number>, fc.Arbitrary<number>][] = [
    ['add', value(), value()],
    ['sub', value(), value()],
    ['mul', value(), value()],
    ['div', value(), awayFromZero(0.25)],
    ['pow', value(0.2, 2), value(-2, 2)],
    // ties are allowed: central differences of max/min at a tie give 1/2, the split the rule uses
    ['max', value(-1, 1), value(-1, 1)],
    ['min', value(-1, 1), value(-1, 1)],
  ];
  for (const [op, va, vb] of binaryCases) {
    it(`${op} with broadcast operands`, () => {
      fc.assert(
        fc.property(
          broadcastPair.chain(([sa, sb]) => fc.tuple(tensorArb(sa, va), tensorArb(sb, vb))),
          ([a, b]) => expectGradOk(op, [a, b]),
        ),
        RUNS,
      );
    });
  }

  it('max and min split the gradient evenly at ties', () => {
    // a = b everywhere: each operand gets half of the cotangent (torch), as central differences say
    const a = f64([2, 2], [1, -2, 0.5, 3]);
    expectGradOk('max', [a, a.clone()]);
    expectGradOk('min', [a, a.clone()]);
    expectGradOk('max', [f64([2], [1, 1]), f64([], [1])]);
  });

  it('pow at a zero base and a zero exponent', () => {
    // 0^2, 0.5^0, 0^3: d/db = a^b·log(a) would be 0·(-inf) = NaN at a = 0; the rule masks it to
    // 0 (torch), which is the slope of 0^b for b > 0. d/da = b·a^(b-1) is masked to 0 where b = 0.
    expectGradOk('pow', [f64([3], [0, 0.5, 0]), f64([3], [2, 0, 3])]);
  });

  const unaryCases: [string, fc.Arbitrary<number>, Attrs?, GradCheckOptions?][] = [
    ['neg', value()],
    ['abs', awayFromZero()],
    ['exp', value()],
    ['log', value(0.2, 3)],
    ['sqrt', value(0.2, 3)],
    ['reciprocal', awayFromZero(0.25)],
    ['tanh', value()],
    ['sigmoid', value(-4, 4)],
    ['relu', awayFromZero()],
    // erf's kernel is a fit with about 1e-7 relative error, so its slope is only close to erf's
    ['erf', value(), {}, { rtol: 1e-4, atol: 1e-6 }],
    ['gelu', value(-3, 3), { approximate: 'none' }, { rtol: 1e-4, atol: 1e-6 }],
    ['gelu', value(-3, 3), { approximate: 'tanh' }],
    ['sin', value(-4, 4)],
    ['cos', value(-4, 4)],
    ['clip', value(-2, 2), { min: -1.05, max: 0.95 }],
    ['clip', value(-2, 2), { min: 0.55 }],
    ['clip', value(-2, 2), { max: -0.45 }],
    ['clip', value(-2, 2), {}],
    ['sign', awayFromZero()],
  ];
  for (const [op, v, attrs, opts] of unaryCases) {
    it(`${op}${attrs && Object.keys(attrs).length ? ` ${JSON.stringify(attrs)}` : ''}`, () => {
      fc.assert(fc.property(shapeArb(0, 3).chain((s) => tensorArb(s, v)), (x) => expectGradOk(op, [x], attrs, opts)), RUNS);
    });
  }

  // away from the jumps: fractional parts in [0.1, 0.4] or [0.6, 0.9] (round jumps at halves)
  const offGrid = fc.tuple(fc.integer({ min: -3, max: 3 }), fc.boolean(), fc.integer({ min: 0, max: 30 })).map(([i, up, f]) => i + (up ? 0.6 : 0.1) + f / 100);
  for (const op of ['floor', 'ceil', 'round']) {
    it(`${op} has a zero gradient`, () => {
      fc.assert(fc.property(shapeArb(0, 3).chain((s) => tensorArb(s, offGrid)), (x) => expectGradOk(op, [x])), RUNS);
    });
  }

  it('where with broadcast condition and branches', () => {
    const arb = shapeArb(1, 3).chain((full) =>
      fc.tuple(broadcastFrom(full), broadcastFrom(full), broadcastFrom(full)).chain(([sc, sa, sb]) =>
        fc.tuple(
          fc.array(fc.boolean(), { minLength: numElements(sc), maxLength: numElements(sc) }).map((bs) => Tensor.from('bool', sc, bs)),
          tensorArb(sa),
          tensorArb(sb),
        ),
      ),
    );
    fc.assert(fc.property(arb, (ins) => expectGradOk('where', ins)), RUNS);
  });

  it('cast between float types passes the gradient back; to integers gives none', () => {
    // values on a 1/8 grid are exact in float32 and ±0.01 changes round to within 1e-9 of themselves
    const x = f64([2, 3], [0.5, -1.25, 2, 0.125, -3, 1.5]);
    expectGradOk('cast', [x], { to: 'float32' }, { eps: 0.01, rtol: 1e-4, atol: 1e-6 });
    expectGradOk('cast', [x], { to: 'float64' });
    // no float result: neither the rule nor finite differences see a gradient
    expectGradOk('cast', [x], { to: 'int32' });
  });
});

// ---- matmul ----

describe('matmul gradients', () => {
  const arb = fc
    .record({
      m: dim(),
      k: dim(),
      n: dim(),
      batch: shapeArb(0, 2),
      aVec: fc.boolean(),
      bVec: fc.boolean(),
    })
    .chain(({ m, k, n, batch, aVec, bVec }) =>
      fc.tuple(broadcastFrom(batch), broadcastFrom(batch)).chain(([ba, bb]) => {
        const sa = aVec ? [k] : [...ba, m, k];
        const sb = bVec ? [k] : [...bb, k, n];
        return fc.tuple(tensorArb(sa), tensorArb(sb));
      }),
    );

  it('handles 1-D, batched and broadcast operands', () => {
    fc.assert(fc.property(arb, ([a, b]) => expectGradOk('matmul', [a, b])), { numRuns: 25 });
  });

  it('covers the fixed corner cases', () => {
    expectGradOk('matmul', [f64([3], [1, 2, 3]), f64([3], [0.5, -1, 2])]); // dot product
    expectGradOk('matmul', [f64([3], [1, 2, 3]), f64([2, 3, 2], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])]); // vector @ batch
    expectGradOk('matmul', [f64([2, 1, 2, 3], new Array(12).fill(0).map((_, i) => i / 7)), f64([3, 3, 1], [1, -1, 2, 0.5, 3, -2, 1, 1, 1])]);
  });
});

// ---- convolution ----

describe('convolution gradients', () => {
  const arb = fc
    .record({
      n: dim(2),
      groups: dim(2),
      cg: dim(2),
      mg: dim(2),
      h: dim(5),
      w: dim(5),
      kh: dim(3),
      kw: dim(3),
      strides: fc.tuple(dim(3), dim(3)),
      pads: fc.tuple(fc.nat(2), fc.nat(2), fc.nat(2), fc.nat(2)),
      dilations: fc.tuple(dim(2), dim(2)),
      bias: fc.boolean(),
    })
    .filter((c) => c.kh <= c.h + c.pads[0] + c.pads[2] - (c.kh - 1) * (c.dilations[0] - 1) && c.kw <= c.w + c.pads[1] + c.pads[3] - (c.kw - 1) * (c.dilations[1] - 1))
    .chain((c) => {
      const C = c.groups * c.cg;
      const M = c.groups * c.mg;
      const attrs = { strides: c.strides, pads: c.pads, dilations: c.dilations, groups: c.groups };
      const ts = [tensorArb([c.n, C, c.h, c.w]), tensorArb([M, c.cg, c.kh, c.kw])];
      if (c.bias) ts.push(tensorArb([M]));
      return fc.tuple(fc.tuple(...ts), fc.constant(attrs));
    });

  it('with strides, pads, dilations, groups and bias', () => {
    fc.assert(
      fc.property(arb, ([inputs, attrs]) => {
        fc.pre(accepts('convolution', inputs, attrs));
        expectGradOk('convolution', inputs, attrs);
      }),
      { numRuns: 25 },
    );
  });

  it('fixed cases: uncovered trailing rows, windows only in padding, large padding', () => {
    const iota = (n: number) => Array.from({ length: n }, (_, i) => ((i * 7) % 11) / 5 - 1);
    // stride 2 over H = 6 with a 3-tap kernel: the last row is read by no window
    expectGradOk('convolution', [f64([1, 1, 6, 5], iota(30)), f64([2, 1, 3, 2], iota(12))], { strides: [2, 2] });
    // H = 1 padded by 2 on top, stride 3: the only window lies in the padding, so dx = dw = 0
    expectGradOk('convolution', [f64([1, 1, 1, 1], [0.7]), f64([1, 1, 1, 1], [1.3]), f64([1], [0.2])], { pads: [2, 2, 0, 0], strides: [3, 3] });
    // padding larger than the kernel extent on every side
    expectGradOk('convolution', [f64([2, 2, 2, 3], iota(24)), f64([4, 1, 2, 2], iota(16))], { pads: [3, 1, 2, 4], groups: 2, strides: [2, 1], dilations: [1, 2] });
  });

  it('convolution_weights_grad (its own gradient: the forward convolution and the input gradient)', () => {
    const wgArb = arb.chain(([inputs, attrs]) => {
      const [x, w] = inputs as [Tensor, Tensor];
      const s = attrs.strides;
      const d = attrs.dilations;
      const p = attrs.pads;
      const out = [0, 1].map((i) => Math.floor((x.shape[2 + i]! + p[i]! + p[i + 2]! - (d[i]! * (w.shape[2 + i]! - 1) + 1)) / s[i]!) + 1);
      return fc.tuple(tensorArb([x.shape[0]!, w.shape[0]!, out[0]!, out[1]!]), fc.constant(x), fc.constant({ ...attrs, weight_shape: [...w.shape] }));
    });
    fc.assert(
      fc.property(wgArb, ([dy, x, attrs]) => {
        fc.pre(accepts('convolution_weights_grad', [dy, x], attrs));
        expectGradOk('convolution_weights_grad', [dy, x], attrs);
      }),
      { numRuns: 20 },
    );
    const iota = (n: number) => Array.from({ length: n }, (_, i) => ((i * 7) % 11) / 5 - 1);
    // windows only in the padding
    expectGradOk('convolution_weights_grad', [f64([1, 1, 1, 1], [0.4]), f64([1, 1, 1, 1], [0.7])], { pads: [2, 2, 0, 0], strides: [3, 3], weight_shape: [1, 1, 1, 1] });
    expectGradOk('convolution_weights_grad', [f64([2, 4, 3, 6], iota(144)), f64([2, 2, 2, 3], iota(24))], { pads: [3, 1, 2, 4], groups: 2, strides: [2, 1], dilations: [1, 2], weight_shape: [4, 1, 2, 2] });
  });
});

// ---- pools ----

interface PoolCase {
  n: number;
  c: number;
  h: number;
  w: number;
  kernel: [number, number];
  strides: [number, number];
  pads: [number, number, number, number];
  dilations: [number, number];
  ceil: boolean;
  includePad: boolean;
}

const poolCase: fc.Arbitrary<PoolCase> = fc
  .record({
    n: dim(2),
    c: dim(2),
    h: dim(5),
    w: dim(5),
    kernel: fc.tuple(dim(3), dim(3)),
    strides: fc.tuple(dim(3), dim(3)),
    pads: fc.tuple(fc.nat(2), fc.nat(2), fc.nat(2), fc.nat(2)),
    dilations: fc.tuple(dim(2), dim(2)),
    ceil: fc.boolean(),
    includePad: fc.boolean(),
  })
  .map((p) => ({
    ...p,
    // pools need every pad below the kernel extent
    pads: p.pads.map((v, i) => Math.min(v, (p.kernel[i % 2]! - 1) * (i % 2 === 0 ? p.dilations[0] : p.dilations[1]))) as PoolCase['pads'],
  }));

describe('pool gradients', () => {
  it('max_pool with padding, dilation and ceil mode (distinct values, so no ties)', () => {
    fc.assert(
      fc.property(
        poolCase.chain((p) => fc.tuple(fc.constant(p), distinctTensorArb([p.n, p.c, p.h, p.w], 8))),
        ([p, x]) => {
          const attrs = { kernel: p.kernel, strides: p.strides, pads: p.pads, dilations: p.dilations, ceil_mode: p.ceil };
          fc.pre(accepts('max_pool', [x], attrs));
          // a dilated window can skip over a small input and hold only padding (-inf)
          fc.pre(forward('max_pool', [x], attrs)[0]!.toArray().every(Number.isFinite));
          expectGradOk('max_pool', [x], attrs);
        },
      ),
      { numRuns: 25 },
    );
  });

  it('max_pool routes overlapping windows to the same winner additively', () => {
    // 3x3 windows, stride 1, on a 1x1x3x4 input whose maximum 9 sits in both windows
    expectGradOk('max_pool', [f64([1, 1, 3, 4], [1, 2, 3, 4, 5, 9, 6, 7, 0.5, 1.5, 2.5, 3.5])], { kernel: [3, 3] });
  });

  it('avg_pool with padding, ceil mode and count_include_pad', () => {
    fc.assert(
      fc.property(
        poolCase.chain((p) => fc.tuple(fc.constant(p), tensorArb([p.n, p.c, p.h, p.w]))),
        ([p, x]) => {
          const attrs = { kernel: p.kernel, strides: p.strides, pads: p.pads, ceil_mode: p.ceil, count_include_pad: p.includePad };
          fc.pre(accepts('avg_pool', [x], attrs));
          expectGradOk('avg_pool', [x], attrs);
        },
      ),
      { numRuns: 25 },
    );
  });

  it('avg_pool_grad has avg_pool as its gradient', () => {
    fc.assert(
      fc.property(poolCase, (p) => {
        const attrs = { kernel: p.kernel, strides: p.strides, pads: p.pads, ceil_mode: p.ceil, count_include_pad: p.includePad };
        const x = f64([p.n, p.c, p.h, p.w], new Array(p.n * p.c * p.h * p.w).fill(0));
        fc.pre(accepts('avg_pool', [x], attrs));
        const dyShape = forward('avg_pool', [x], attrs)[0]!.shape;
        const dy = f64(dyShape, dyShape.length ? Array.from({ length: numElements(dyShape) }, (_, i) => ((i * 5) % 7) - 3) : []);
        expectGradOk('avg_pool_grad', [dy], { ...attrs, input_shape: [p.n, p.c, p.h, p.w] });
      }),
      { numRuns: 10 },
    );
  });

  it('global_avg_pool for rank 2 to 4', () => {
    fc.assert(fc.property(shapeArb(2, 4).chain((s) => tensorArb(s)), (x) => expectGradOk('global_avg_pool', [x])), RUNS);
  });
});

// ---- norms ----

describe('norm gradients', () => {
  const bnArb = fc
    .tuple(dim(3), dim(3), shapeArb(0, 2), fc.boolean())
    .filter(([n, , sp, training]) => !training || n * numElements(sp) > 1)
    .chain(([n, c, sp, training]) =>
      fc.tuple(
        distinctTensorArb([n, c, ...sp], 8),
        tensorArb([c], value(0.5, 2)),
        tensorArb([c]),
        tensorArb([c]),
        tensorArb([c], value(0.3, 2)),
        fc.constant(training),
      ),
    );

  it('batch_norm in training and inference mode', () => {
    fc.assert(
      fc.property(bnArb, ([x, scale, bias, mean, variance, training]) => {
        // momentum 1 keeps the running statistics equal to the given ones, so they do not depend
        // on x and finite differences see only y (running statistics carry no gradient)
        expectGradOk('batch_norm', [x, scale, bias, mean, variance], { training, momentum: 1, epsilon: 1e-3 });
      }),
      { numRuns: 20 },
    );
  });

  it('batch_norm_grad (the gradient of training-mode batch_norm, differentiated again)', () => {
    const arb = fc
      .tuple(dim(3), dim(3), shapeArb(0, 2))
      .filter(([n, , sp]) => n * numElements(sp) > 1)
      .chain(([n, c, sp]) => fc.tuple(tensorArb([n, c, ...sp]), distinctTensorArb([n, c, ...sp], 8), tensorArb([c], value(0.5, 2))));
    fc.assert(
      fc.property(arb, ([g, x, scale]) => {
        expectGradOk('batch_norm_grad', [g, x, scale], { epsilon: 1e-3 });
      }),
      { numRuns: 20 },
    );
  });

  it('batch_norm_stats (mean and inverse standard deviation per channel)', () => {
    const arb = fc
      .tuple(dim(3), dim(3), shapeArb(0, 2))
      .chain(([n, c, sp]) => fc.tuple(distinctTensorArb([n, c, ...sp], 8), fc.constantFrom(1e-3, 0.5)));
    fc.assert(
      fc.property(arb, ([x, epsilon]) => {
        expectGradOk('batch_norm_stats', [x], { epsilon });
      }),
      { numRuns: 20 },
    );
  });

  const lnArb = shapeArb(1, 3)
    .chain((shape) => fc.tuple(fc.constant(shape), fc.integer({ min: -shape.length, max: shape.length - 1 }), fc.integer({ min: 0, max: 2 })))
    .chain(([shape, axis, affine]) => {
      const norm = shape.slice(axis < 0 ? axis + shape.length : axis);
      return fc.tuple(broadcastFrom(norm), broadcastFrom(norm)).chain(([ss, bs]) => {
        const ins: fc.Arbitrary<Tensor>[] = [distinctTensorArb(shape, 8)];
        if (affine >= 1) ins.push(tensorArb(ss, value(0.5, 2)));
        if (affine >= 2) ins.push(tensorArb(bs));
        return fc.tuple(fc.tuple(...ins), fc.constant(axis));
      });
    });

  it('layer_norm over several axes with broadcast scale and bias', () => {
    fc.assert(fc.property(lnArb, ([ins, axis]) => expectGradOk('layer_norm', ins, { axis, epsilon: 1e-3 })), { numRuns: 20 });
  });

  const gnArb = fc
    .tuple(dim(2), dim(2), dim(2), shapeArb(0, 2))
    .chain(([n, g, perGroup, sp]) =>
      fc.tuple(
        distinctTensorArb([n, g * perGroup, ...sp], 8),
        tensorArb([g * perGroup], value(0.5, 2)),
        tensorArb([g * perGroup]),
        fc.constant(g),
      ),
    );

  it('group_norm', () => {
    fc.assert(fc.property(gnArb, ([x, scale, bias, g]) => expectGradOk('group_norm', [x, scale, bias], { num_groups: g, epsilon: 1e-3 })), RUNS);
  });
});

// ---- softmax ----

describe('softmax gradients', () => {
  const arb = shapeArb(0, 3, 4).chain((s) =>
    fc.tuple(tensorArb(s, value(-3, 3)), fc.integer({ min: -Math.max(s.length, 1), max: Math.max(s.length, 1) - 1 })),
  );
  for (const op of ['softmax', 'log_softmax']) {
    it(`${op} along every axis`, () => {
      fc.assert(fc.property(arb, ([x, axis]) => expectGradOk(op, [x], { axis })), { numRuns: 20 });
    });
  }
});

// ---- losses ----

describe('loss gradients', () => {
  interface LossCase {
    inputs: Tensor[];
    attrs: Attrs;
  }
  function lossArb(withSmoothing: boolean): fc.Arbitrary<LossCase> {
    return fc
      .record({
        batched: fc.boolean(),
        n: dim(3),
        c: dim(4),
        extra: shapeArb(0, 1),
        weight: fc.boolean(),
        ignore: fc.constantFrom(undefined, -100, 0, 1),
        reduction: fc.constantFrom('mean', 'sum', 'none'),
        smoothing: withSmoothing ? fc.constantFrom(0, 0.1, 0.5, 1) : fc.constant(0),
      })
      .chain((p) => {
        const xShape = p.batched ? [p.n, p.c, ...p.extra] : [p.c];
        const tShape = p.batched ? [p.n, ...p.extra] : [];
        const nt = numElements(tShape);
        const target = fc
          .array(fc.oneof(fc.integer({ min: 0, max: p.c - 1 }), fc.constant(p.ignore ?? 0)), { minLength: nt, maxLength: nt })
          .map((ts) => Tensor.from('int32', tShape, ts));
        const ins = [tensorArb(xShape, value(-3, 3)), target];
        if (p.weight) ins.push(tensorArb([p.c], value(0.25, 2)));
        const attrs: Attrs = { reduction: p.reduction };
        if (p.ignore !== undefined) attrs['ignore_index'] = p.ignore;
        if (withSmoothing) attrs['label_smoothing'] = p.smoothing;
        return fc.tuple(...ins).map((inputs) => ({ inputs, attrs }));
      })
      .filter(({ inputs, attrs }) => {
        // 'mean' over only ignored targets is 0/0
        if (attrs['reduction'] !== 'mean' || attrs['ignore_index'] === undefined) return true;
        return inputs[1]!.toArray().some((t) => t !== attrs['ignore_index']);
      });
  }

  it('nll_loss with weights, ignore_index and every reduction', () => {
    fc.assert(fc.property(lossArb(false), ({ inputs, attrs }) => expectGradOk('nll_loss', inputs, attrs)), { numRuns: 30 });
  });

  it('cross_entropy with weights, ignore_index, label smoothing and every reduction', () => {
    fc.assert(fc.property(lossArb(true), ({ inputs, attrs }) => expectGradOk('cross_entropy', inputs, attrs)), { numRuns: 30 });
  });

  it('ignores an in-range ignore_index and weights the mean by the kept targets', () => {
    // targets [0, 1, 1] with ignore_index 1: only sample 0 counts, with weight w[0] = 2
    const x = f64([3, 3], [0.1, -0.2, 0.3, 1, 2, 3, -1, 0, 1]);
    const t = Tensor.from('int32', [3], [0, 1, 1]);
    const w = f64([3], [2, 0.5, 1]);
    expectGradOk('nll_loss', [x, t, w], { ignore_index: 1 });
    expectGradOk('cross_entropy', [x, t, w], { ignore_index: 1, label_smoothing: 0.2 });
  });
});
