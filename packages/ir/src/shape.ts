import { DType, dtypeShortName, parseDType } from './dtype.js';

export type Shape = readonly number[];

export interface TensorType {
  readonly dtype: DType;
  readonly shape: Shape;
}

export function tensorType(dtype: DType, shape: Shape): TensorType {
  return { dtype, shape: [...shape] };
}

export function numElements(shape: Shape): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/**
 * The largest dimension and element count of any tensor type. Element indices are 32-bit on the
 * device and in the host's typed arrays (allocData refuses more than 2^31 - 1 elements), so one
 * bound serves every front end: the model language, the text IR and the ONNX importer all check
 * shapes with shapeLimitProblem and report the same message.
 */
export const MAX_DIMENSION = 2 ** 31 - 1;
export const MAX_ELEMENTS = 2 ** 31 - 1;

/** Why `shape` is beyond the limits above, or undefined when it is within them. */
export function shapeLimitProblem(shape: Shape): string | undefined {
  for (const d of shape) {
    if (!Number.isSafeInteger(d) || d < 0 || d > MAX_DIMENSION) {
      return `a dimension must be an integer from 0 to ${MAX_DIMENSION} (2^31-1), got ${formatNumber(d)}`;
    }
  }
  const n = numElements(shape);
  if (n > MAX_ELEMENTS) return `a tensor holds at most ${MAX_ELEMENTS} (2^31-1) elements; shape ${formatShape(shape)} has ${formatNumber(n)}`;
  return undefined;
}

/** Integers in full (no exponent) as far as they are exact, so messages show the value written. */
function formatNumber(x: number): string {
  return Number.isInteger(x) && Math.abs(x) < 1e21 ? BigInt(x).toString() : String(x);
}

export function shapesEqual(a: Shape, b: Shape): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export function typesEqual(a: TensorType, b: TensorType): boolean {
  return a.dtype === b.dtype && shapesEqual(a.shape, b.shape);
}

export function formatShape(s: Shape): string {
  return `[${s.join(',')}]`;
}

/** "f32[4,16]" — the text IR spelling of a tensor type. */
export function formatType(t: TensorType): string {
  return `${dtypeShortName(t.dtype)}${formatShape(t.shape)}`;
}

export function parseType(s: string): TensorType | undefined {
  const m = /^([a-z0-9]+)\[([0-9,\s]*)\]$/.exec(s.trim());
  if (!m) return undefined;
  const dtype = parseDType(m[1]!);
  if (!dtype) return undefined;
  const shape = m[2]!.trim() === '' ? [] : m[2]!.split(',').map((x) => Number(x.trim()));
  return { dtype, shape };
}

/** Row-major strides. */
export function stridesOf(shape: Shape): number[] {
  const st = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    st[i] = s;
    s *= shape[i]!;
  }
  return st;
}

/** Normalises a possibly negative axis; throws OpError-friendly message when out of range. */
export function normalizeAxis(axis: number, rank: number, what = 'axis'): number {
  const a = axis < 0 ? axis + rank : axis;
  if (!Number.isInteger(a) || a < 0 || a >= Math.max(rank, 1)) {
    throw new ShapeError(`${what} ${axis} is out of range for rank ${rank}`);
  }
  return a;
}

/** NumPy/ONNX multidirectional broadcasting of two shapes. */
export function broadcastShapes(a: Shape, b: Shape): number[] {
  const n = Math.max(a.length, b.length);
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const da = i < n - a.length ? 1 : a[i - (n - a.length)]!;
    const db = i < n - b.length ? 1 : b[i - (n - b.length)]!;
    if (da === db || db === 1) out[i] = da;
    else if (da === 1) out[i] = db;
    else throw new ShapeError(`shapes ${formatShape(a)} and ${formatShape(b)} are not broadcastable`);
  }
  return out;
}

export function broadcastAll(shapes: readonly Shape[]): number[] {
  let out: number[] = [];
  for (const s of shapes) out = broadcastShapes(out, s);
  return out;
}

/**
 * An error in shape or type inference. Thrown by op definitions; the builder and the verifier
 * turn it into a diagnostic at the op's source location.
 */
export class ShapeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ShapeError';
  }
}
