import { Shape, numElements } from '../shape.js';

/** Calls `f(base, stride, n)` for every line of `shape` along `axis`: element i of a line is at base + i*stride. */
export function forEachLine(shape: Shape, axis: number, f: (base: number, stride: number, n: number) => void): void {
  const n = shape.length === 0 ? 1 : shape[axis]!;
  const inner = numElements(shape.slice(axis + 1));
  const outer = numElements(shape.slice(0, axis));
  for (let o = 0; o < outer; o++) for (let i = 0; i < inner; i++) f(o * n * inner + i, inner, n);
}

/**
 * Numerically stable softmax (or log-softmax) of `x` along `axis`, in float64: the maximum is
 * subtracted first so exp never overflows.
 */
export function softmaxValues(x: ArrayLike<number>, shape: Shape, axis: number, log: boolean): Float64Array {
  const y = new Float64Array(x.length);
  forEachLine(shape, axis, (base, stride, n) => {
    let m = -Infinity;
    for (let i = 0; i < n; i++) {
      const v = x[base + i * stride]!;
      if (v > m || Number.isNaN(v)) m = v;
    }
    // all -inf: every exponent would be NaN; torch gives NaN too, so let it flow
    let s = 0;
    for (let i = 0; i < n; i++) s += Math.exp(x[base + i * stride]! - m);
    if (log) {
      const ls = Math.log(s);
      for (let i = 0; i < n; i++) y[base + i * stride] = x[base + i * stride]! - m - ls;
    } else {
      for (let i = 0; i < n; i++) y[base + i * stride] = Math.exp(x[base + i * stride]! - m) / s;
    }
  });
  return y;
}
