import { DType, storeRounding } from '../dtype.js';
import { Shape, broadcastAll, numElements, shapesEqual, stridesOf } from '../shape.js';
import { Tensor, allocData } from '../tensor.js';

/**
 * Shared loops for reference kernels. Values are computed in float64 and stored with the
 * output dtype's rounding (float32 by the typed array; float16, the low-precision floats, bool and
 * the wrap-around of narrow integers by storeRounding).
 */
export function storeConverter(dtype: DType): ((x: number) => number) | undefined {
  return storeRounding(dtype);
}

/** Strides of `shape` viewed in an output of rank `outRank`, 0 on broadcast dimensions. */
export function broadcastStrides(shape: Shape, outShape: Shape): number[] {
  const st = stridesOf(shape);
  const out = new Array<number>(outShape.length).fill(0);
  const off = outShape.length - shape.length;
  for (let i = 0; i < shape.length; i++) out[i + off] = shape[i] === 1 ? 0 : st[i]!;
  return out;
}

/**
 * Calls `visit(outIndex, offsets)` for every element of `outShape`, where offsets[k] is the
 * flat offset into input k (broadcast). `offsets` is reused between calls.
 */
export function forEachBroadcast(outShape: Shape, inShapes: readonly Shape[], visit: (i: number, offsets: Int32Array | number[]) => void): void {
  const n = numElements(outShape);
  const k = inShapes.length;
  const offsets = new Array<number>(k).fill(0);
  if (inShapes.every((s) => shapesEqual(s, outShape))) {
    for (let i = 0; i < n; i++) {
      for (let j = 0; j < k; j++) offsets[j] = i;
      visit(i, offsets);
    }
    return;
  }
  const rank = outShape.length;
  const strides = inShapes.map((s) => broadcastStrides(s, outShape));
  const idx = new Array<number>(rank).fill(0);
  for (let i = 0; i < n; i++) {
    visit(i, offsets);
    // advance the multi-index, updating offsets incrementally
    for (let d = rank - 1; d >= 0; d--) {
      idx[d]!++;
      for (let j = 0; j < k; j++) offsets[j]! += strides[j]![d]!;
      if (idx[d]! < outShape[d]!) break;
      for (let j = 0; j < k; j++) offsets[j]! -= strides[j]![d]! * outShape[d]!;
      idx[d] = 0;
    }
  }
}

export function mapUnary(a: Tensor, outDtype: DType, f: (x: number) => number): Tensor {
  const out = allocData(outDtype, a.size);
  const conv = storeConverter(outDtype);
  const src = a.data;
  if (conv) for (let i = 0; i < src.length; i++) out[i] = conv(f(src[i]!));
  else for (let i = 0; i < src.length; i++) out[i] = f(src[i]!);
  return new Tensor(outDtype, a.shape, out);
}

export function mapBinary(a: Tensor, b: Tensor, outDtype: DType, f: (x: number, y: number) => number): Tensor {
  const shape = broadcastAll([a.shape, b.shape]);
  const out = allocData(outDtype, numElements(shape));
  const conv = storeConverter(outDtype);
  const da = a.data;
  const db = b.data;
  forEachBroadcast(shape, [a.shape, b.shape], (i, o) => {
    const v = f(da[o[0]!]!, db[o[1]!]!);
    out[i] = conv ? conv(v) : v;
  });
  return new Tensor(outDtype, shape, out);
}

export function mapNary(inputs: readonly Tensor[], outDtype: DType, f: (xs: number[]) => number): Tensor {
  const shape = broadcastAll(inputs.map((t) => t.shape));
  const out = allocData(outDtype, numElements(shape));
  const conv = storeConverter(outDtype);
  const xs = new Array<number>(inputs.length).fill(0);
  forEachBroadcast(
    shape,
    inputs.map((t) => t.shape),
    (i, o) => {
      for (let j = 0; j < inputs.length; j++) xs[j] = inputs[j]!.data[o[j]!]!;
      const v = f(xs);
      out[i] = conv ? conv(v) : v;
    },
  );
  return new Tensor(outDtype, shape, out);
}

/** A tensor of `dtype` and `shape` from float64 values, with the dtype's rounding. */
export function fromValues(dtype: DType, shape: Shape, values: ArrayLike<number>): Tensor {
  const out = allocData(dtype, values.length);
  const conv = storeConverter(dtype);
  for (let i = 0; i < values.length; i++) out[i] = conv ? conv(values[i]!) : values[i]!;
  return new Tensor(dtype, shape, out);
}
