import { Tensor, formatType } from '@tilegraph/ir';

/** NumPy-like printing of a tensor, eliding the middle of long dimensions. */
export function formatTensor(t: Tensor, edge = 3): string {
  const fmt = (x: number) => (t.dtype === 'bool' ? (x ? 'true' : 'false') : Number.isInteger(x) && !t.dtype.startsWith('float') ? String(x) : x.toPrecision(6).replace(/\.?0+(e|$)/, '$1'));
  const rec = (dim: number, off: number, stride: number[]): string => {
    if (dim === t.shape.length) return fmt(t.data[off]!);
    const n = t.shape[dim]!;
    const parts: string[] = [];
    for (let i = 0; i < n; i++) {
      if (n > 2 * edge && i === edge) {
        parts.push('...');
        i = n - edge - 1;
        continue;
      }
      parts.push(rec(dim + 1, off + i * stride[dim]!, stride));
    }
    return `[${parts.join(dim === t.shape.length - 1 ? ', ' : ',\n' + ' '.repeat(dim + 1))}]`;
  };
  const stride: number[] = [];
  let s = 1;
  for (let i = t.shape.length - 1; i >= 0; i--) {
    stride[i] = s;
    s *= t.shape[i]!;
  }
  return `${formatType(t)} ${rec(0, 0, stride)}`;
}
