import { Shape, ShapeError, normalizeAxis, stridesOf } from '../shape.js';

/** Normalised, sorted, de-duplicated reduction axes; an empty list means all axes. */
export function reductionAxes(axes: readonly number[] | undefined, rank: number): number[] {
  if (!axes || axes.length === 0) return Array.from({ length: rank }, (_, i) => i);
  const out = [...new Set(axes.map((a) => normalizeAxis(a, rank)))].sort((x, y) => x - y);
  if (out.length !== axes.length) throw new ShapeError(`axes [${axes.join(', ')}] repeat an axis`);
  return out;
}

export function reducedShape(shape: Shape, axes: readonly number[], keepdims: boolean): number[] {
  const out: number[] = [];
  shape.forEach((d, i) => {
    if (axes.includes(i)) {
      if (keepdims) out.push(1);
    } else out.push(d);
  });
  return out;
}

/**
 * For each output element (the kept dims), calls `visit(outIndex, inOffsets)` with the flat input
 * offsets of all reduced elements, in row-major order of the reduced dims.
 */
export function forEachReduction(shape: Shape, axes: readonly number[], visit: (outIndex: number, offsets: readonly number[]) => void): void {
  const st = stridesOf(shape);
  const kept = shape.map((_, i) => i).filter((i) => !axes.includes(i));
  // offsets of the reduced elements relative to the first one
  let rel = [0];
  for (const a of axes) {
    const next: number[] = [];
    for (const r of rel) for (let j = 0; j < shape[a]!; j++) next.push(r + j * st[a]!);
    rel = next;
  }
  const outCount = kept.reduce((n, i) => n * shape[i]!, 1);
  const idx = new Array<number>(kept.length).fill(0);
  const offs = new Array<number>(rel.length);
  let base = 0;
  for (let o = 0; o < outCount; o++) {
    for (let j = 0; j < rel.length; j++) offs[j] = base + rel[j]!;
    visit(o, offs);
    for (let d = kept.length - 1; d >= 0; d--) {
      const ax = kept[d]!;
      idx[d]!++;
      base += st[ax]!;
      if (idx[d]! < shape[ax]!) break;
      base -= st[ax]! * shape[ax]!;
      idx[d] = 0;
    }
  }
}
