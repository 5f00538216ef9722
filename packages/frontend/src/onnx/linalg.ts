import { Tensor, Value, isFloat } from '@tilegraph/ir';
import { NodeContext } from './context.js';

/** Linear algebra the IR has no op for, as small graphs of IR ops. */

/** Largest matrix Det expands (7! = 5040 products). */
const MAX_DET_ORDER = 7;

/** The permutations of 0..n-1 with their signs (Heap's algorithm). */
function permutations(n: number): { perm: number[]; sign: number }[] {
  const out: { perm: number[]; sign: number }[] = [];
  const a = [...Array(n).keys()];
  const cnt = new Array<number>(n).fill(0);
  let sign = 1;
  out.push({ perm: [...a], sign });
  let i = 0;
  while (i < n) {
    if (cnt[i]! < i) {
      const j = i % 2 === 0 ? 0 : cnt[i]!;
      [a[j], a[i]] = [a[i]!, a[j]!];
      sign = -sign;
      out.push({ perm: [...a], sign });
      cnt[i]!++;
      i = 0;
    } else {
      cnt[i] = 0;
      i++;
    }
  }
  return out;
}

/**
 * Det of [..., n, n] by the Leibniz formula: the signed sum over permutations p of the products
 * x[0, p(0)]·…·x[n-1, p(n-1)], gathered from the flattened matrices in one op. Exact in its
 * operations for the small matrices it accepts.
 */
export function det(c: NodeContext): Value {
  const e = c.e;
  const x = c.input(0);
  const shape = [...x.type.shape];
  const r = shape.length;
  if (r < 2 || shape[r - 1] !== shape[r - 2]) c.fail(`needs square matrices [..., n, n], got [${shape.join(',')}]`);
  if (!isFloat(x.type.dtype)) c.fail(`needs a float input, got ${x.type.dtype}`);
  const n = shape[r - 1]!;
  if (n > MAX_DET_ORDER) c.unsupported(`a determinant of order ${n} is larger than the importer expands (${MAX_DET_ORDER}); compute it outside the model`);
  if (n === 0) return e.filled(x.type.dtype, shape.slice(0, -2), 1);
  const perms = permutations(n);
  const flat = e.op('reshape', [x], { shape: [...shape.slice(0, -2), n * n] });
  const idx = Tensor.from('int32', [perms.length, n], perms.flatMap(({ perm }) => perm.map((p, i) => i * n + p)));
  const terms = e.op('reduce_prod', [e.op('gather', [flat, e.constant(idx)], { axis: r - 2 })], { axes: [-1], keepdims: false });
  const signs = e.constant(Tensor.from(x.type.dtype, [perms.length], perms.map((p) => p.sign)));
  return e.op('reduce_sum', [e.mul(terms, signs)], { axes: [-1], keepdims: false });
}
