import { DType, Graph, GraphBuilder, Tensor } from '@tilegraph/ir';

/**
 * Small models for the session tests, with float64 reference arithmetic written independently of
 * the graph (plain loops), so expectations do not come from the code under test.
 */

/**
 * Linear regression: pred = x·w (x [B, F], w [F]); loss = mean((pred − y)²) over the micro-batch.
 * The loss is also an output named 'loss'.
 */
export function linearRegression(B: number, init: readonly number[], dtype: DType = 'float32'): Graph {
  const F = init.length;
  const b = new GraphBuilder('linreg');
  const x = b.input('x', dtype, [B, F]);
  const y = b.input('y', dtype, [B]);
  const w = b.parameter('w', dtype, [F], Tensor.from(dtype, [F], init));
  const d = b.op('sub', [b.op('matmul', [x, w]), y]);
  b.output('loss', b.op('identity_loss', [b.op('mul', [d, d])], { reduction: 'mean' }));
  return b.graph;
}

/** d/dw of mean_i (x_i·w − y_i)² = (2/B) Σ_i (x_i·w − y_i) x_i. */
export function linregGrad(w: readonly number[], xs: readonly (readonly number[])[], ys: readonly number[]): number[] {
  const g = w.map(() => 0);
  xs.forEach((x, i) => {
    const r = x.reduce((s, xj, j) => s + xj * w[j]!, 0) - ys[i]!;
    x.forEach((xj, j) => (g[j]! += (2 / xs.length) * r * xj));
  });
  return g;
}

/** One plain SGD step on the mean of the given gradients. */
export function sgdStep(w: readonly number[], grads: readonly (readonly number[])[], lr: number): number[] {
  return w.map((wj, j) => wj - (lr * grads.reduce((s, g) => s + g[j]!, 0)) / grads.length);
}

/** Deterministic, varied sample values in [−1, 1] (multiples of 1/8, exact in float32). */
export function sampleValue(i: number): number {
  return (((i * 37 + 11) % 17) - 8) / 8;
}

/** A micro-batch of the regression data: sample k has x = [v(2k), v(2k+1)], y = v(3k + 5). */
export interface Batch {
  xs: number[][];
  ys: number[];
}
export function regressionBatch(firstSample: number, B: number, F = 2): Batch {
  const xs: number[][] = [];
  const ys: number[] = [];
  for (let k = firstSample; k < firstSample + B; k++) {
    xs.push(Array.from({ length: F }, (_, j) => sampleValue(F * k + j)));
    ys.push(sampleValue(3 * k + 5));
  }
  return { xs, ys };
}

/** Concatenates micro-batches into the run inputs x [n·B, F] and y [n·B]. */
export function feed(batches: readonly Batch[], dtype: DType = 'float32'): { x: Tensor; y: Tensor } {
  const xs = batches.flatMap((b) => b.xs);
  const ys = batches.flatMap((b) => b.ys);
  return { x: Tensor.from(dtype, [xs.length, xs[0]!.length], xs.flat()), y: Tensor.from(dtype, [ys.length], ys) };
}

/** |got − want| ≤ atol + rtol·|want| elementwise, with a message naming the first bad index. */
export function expectClose(got: ArrayLike<number>, want: readonly number[], atol = 1e-6, rtol = 1e-5): void {
  if (got.length !== want.length) throw new Error(`length ${got.length}, expected ${want.length}`);
  for (let i = 0; i < want.length; i++) {
    const ok = Math.abs(got[i]! - want[i]!) <= atol + rtol * Math.abs(want[i]!);
    if (!ok) throw new Error(`index ${i}: got ${got[i]}, expected ${want[i]} (all: [${Array.from(got).join(', ')}] vs [${want.join(', ')}])`);
  }
}

/** Runs `f` and returns the error it throws (failing when it does not throw). */
export function thrown(f: () => unknown): Error {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected an error');
}
