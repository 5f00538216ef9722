import { Tensor, Value, kernels, numElements } from '@tilegraph/ir';
import { NodeContext } from './context.js';

/**
 * Pooling the IR's 2-D window ops do not cover (average and Lp pooling with dilations, MaxPool's
 * Indices output), written tap by tap: the input is padded once, and each kernel position is a
 * strided slice of it with the output's shape. The taps are summed (average, Lp) or compared in
 * kernel order (max, so the first maximum wins, as ONNX's reference does). Divisors and flat
 * indices are tables computed at import.
 */

/** Kernel, strides, dilations and pads (all begins, then all ends) of one node's window. */
export interface PoolWindow {
  readonly kernel: readonly number[];
  readonly strides: readonly number[];
  readonly dilations: readonly number[];
  readonly pads: readonly number[];
}

/** Most kernel positions a tap-by-tap pooling builds (each is one slice op). */
const MAX_TAPS = 512;

interface Taps {
  /** Output spatial sizes. */
  readonly out: number[];
  /** One strided slice per kernel position, in row-major kernel order, with that position. */
  readonly taps: { readonly value: Value; readonly at: readonly number[] }[];
}

function tapsOf(c: NodeContext, x: Value, w: PoolWindow, ceil: boolean, padValue: number): Taps {
  const e = c.e;
  const spatial = x.type.shape.slice(2);
  const k = spatial.length;
  const count = numElements(w.kernel);
  if (count > MAX_TAPS) c.unsupported(`a ${w.kernel.join('x')} window needs ${count} kernel positions here, more than the importer builds (${MAX_TAPS})`);
  const out = spatial.map((n, i) => kernels.windowOutputLength(n, w.kernel[i]!, w.strides[i]!, w.pads[i]!, w.pads[i + k]!, w.dilations[i]!, ceil));
  if (out.some((o) => o < 1)) c.fail(`the window (kernel ${w.kernel.join('x')}, dilations ${w.dilations.join('x')}) is larger than the padded input ${spatial.join('x')}`);
  // trailing padding grown so that the last window of ceil mode lies inside the padded input
  const ends = spatial.map((n, i) => Math.max(w.pads[i + k]!, (out[i]! - 1) * w.strides[i]! + (w.kernel[i]! - 1) * w.dilations[i]! + 1 - n - w.pads[i]!));
  const begins = w.pads.slice(0, k);
  const padded = begins.every((p) => p === 0) && ends.every((p) => p === 0) ? x : e.op('pad', [x], { pads: [0, 0, ...begins, 0, 0, ...ends], value: padValue });
  const axes = spatial.map((_, i) => i + 2);
  const taps: { value: Value; at: number[] }[] = [];
  for (let t = 0; t < count; t++) {
    // row-major kernel position of tap t
    const at: number[] = new Array<number>(k);
    let rest = t;
    for (let i = k - 1; i >= 0; i--) {
      at[i] = rest % w.kernel[i]!;
      rest = Math.floor(rest / w.kernel[i]!);
    }
    const starts = at.map((j, i) => j * w.dilations[i]!);
    const value = e.op('slice', [padded], { starts, ends: starts.map((s, i) => s + (out[i]! - 1) * w.strides[i]! + 1), axes, steps: [...w.strides] });
    taps.push({ value, at });
  }
  return { out, taps };
}

/** A table of shape [1, 1, ...out] whose entry at output position o is f(o). */
function outputTable(out: readonly number[], f: (o: readonly number[]) => number): Tensor {
  const data = new Array<number>(numElements(out));
  const o = new Array<number>(out.length).fill(0);
  for (let flat = 0; flat < data.length; flat++) {
    data[flat] = f(o);
    for (let i = out.length - 1; i >= 0; i--) {
      if (++o[i]! < out[i]!) break;
      o[i] = 0;
    }
  }
  return Tensor.from('float32', [1, 1, ...out], data);
}

/**
 * Sum or average over dilated windows of x[N, C, ...spatial]. `avg` divides by the number of
 * input elements in the window, or with `includePad` by the window clipped to the padded input.
 */
export function tapPool(c: NodeContext, x: Value, w: PoolWindow, ceil: boolean, how: 'sum' | 'avg' | 'avg-include-pad'): Value {
  const e = c.e;
  const spatial = x.type.shape.slice(2);
  const k = spatial.length;
  const { out, taps } = tapsOf(c, x, w, ceil, 0);
  const sum = taps.map((t) => t.value).reduce((a, b) => e.add(a, b));
  if (how === 'sum') return sum;
  // per axis, how many of the window's positions count; the divisor is their product
  const counted = (i: number, o: number): number => {
    const [lo, hi] = how === 'avg' ? [0, spatial[i]!] : [-w.pads[i]!, spatial[i]! + w.pads[i + k]!];
    let n = 0;
    for (let j = 0; j < w.kernel[i]!; j++) {
      const p = o * w.strides[i]! - w.pads[i]! + j * w.dilations[i]!;
      if (p >= lo && p < hi) n++;
    }
    return n;
  };
  const divisor = outputTable(out, (o) => o.reduce((acc, oi, i) => acc * counted(i, oi), 1));
  return e.div(sum, e.cast(e.constant(divisor), x.type.dtype));
}

/**
 * Max over windows with the flat index (into x, as int32) of the first maximum: MaxPool's two
 * outputs. With `columnMajor` (storage_order=1) the spatial part of the index counts the first
 * spatial dimension fastest.
 */
export function maxPoolWithIndices(c: NodeContext, x: Value, w: PoolWindow, ceil: boolean, columnMajor: boolean): Value[] {
  const e = c.e;
  const [n, ch, ...spatial] = x.type.shape as number[];
  const k = spatial.length;
  const plane = numElements(spatial);
  if (n! * ch! * plane > 2 ** 31) c.unsupported(`the input has more elements than int32 indices reach`);
  const { out, taps } = tapsOf(c, x, w, ceil, -Infinity);
  // flat index = (n·C + c)·plane + spatial offset of the tap's element
  const base = e.constant(Tensor.from('int32', [n!, ch!, ...out.map(() => 1)], [...Array(n! * ch!).keys()].map((i) => i * plane)));
  const indexOf = (at: readonly number[]): Value => {
    const t = outputTable(out, (o) => {
      const pos = (i: number) => o[i]! * w.strides[i]! - w.pads[i]! + at[i]! * w.dilations[i]!;
      let flat = 0;
      const order = [...Array(k).keys()];
      for (const i of columnMajor ? order.reverse() : order) flat = flat * spatial[i]! + pos(i);
      return flat;
    });
    return e.add(base, e.cast(e.constant(t), 'int32'));
  };
  let best = taps[0]!.value;
  let index = indexOf(taps[0]!.at);
  for (const tap of taps.slice(1)) {
    const wins = e.op('greater', [tap.value, best]);
    best = e.op('where', [wins, tap.value, best]);
    index = e.op('where', [wins, indexOf(tap.at), index]);
  }
  return [best, index];
}
