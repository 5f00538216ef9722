/** Scalar math the kernels need that Math lacks. */

/** erf(x) with float64 accuracy better than 1.2e-7 relative (Chebyshev fit of erfc; Numerical Recipes erfcc form). */
export function erf(x: number): number {
  if (Number.isNaN(x)) return NaN;
  const z = Math.abs(x);
  if (z < 0.5) {
    // Maclaurin series converges fast near 0 and keeps relative accuracy for tiny x
    let sum = 0;
    let term = z;
    for (let n = 0; n < 30; n++) {
      const t = term / (2 * n + 1);
      sum += t;
      term *= (-z * z) / (n + 1);
      if (Math.abs(t) < 1e-17 * Math.abs(sum)) break;
    }
    return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * sum;
  }
  const t = 1 / (1 + 0.5 * z);
  const r =
    t *
    Math.exp(
      -z * z -
        1.26551223 +
        t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x >= 0 ? 1 - r : r - 1;
}
