import { Shape, ShapeError, formatShape } from '../shape.js';

/**
 * Sliding-window geometry shared by conv2d and the 2-D pools: attribute checks, output sizes and
 * the tap ranges of each window. Layout is NCHW; pads are (top, left, bottom, right).
 */
export interface Window2d {
  /** Kernel height and width (taps, before dilation). */
  readonly kernel: readonly [number, number];
  readonly strides: readonly [number, number];
  /** top, left, bottom, right */
  readonly pads: readonly [number, number, number, number];
  readonly dilations: readonly [number, number];
  readonly ceilMode: boolean;
}

/** Span of a dilated kernel: the distance from its first to its last tap, plus one. */
export function kernelExtent(kernel: number, dilation: number): number {
  return dilation * (kernel - 1) + 1;
}

/**
 * Number of windows along one spatial dimension. In ceil mode a last, partial window is kept
 * only when it starts inside the input or the leading padding (the torch rule), so no window
 * lies wholly in the trailing padding.
 */
export function windowOutputLength(input: number, kernel: number, stride: number, padBegin: number, padEnd: number, dilation: number, ceilMode: boolean): number {
  const span = input + padBegin + padEnd - kernelExtent(kernel, dilation);
  let out = (ceilMode ? Math.ceil(span / stride) : Math.floor(span / stride)) + 1;
  if (ceilMode && out > 1 && (out - 1) * stride >= input + padBegin) out--;
  return out;
}

function pairAttr(name: string, v: readonly number[], min: number, what: string): [number, number] {
  if (v.length !== 2) throw new ShapeError(`${name} ${formatShape(v)} must have 2 entries (height, width), got ${v.length}`);
  if (v.some((d) => d < min)) throw new ShapeError(`${name} ${formatShape(v)} must be ${what}`);
  return [v[0]!, v[1]!];
}

export interface WindowCheck {
  /** Spatial size of the input (H, W). */
  readonly input: readonly [number, number];
  /** Full input shape, for messages. */
  readonly inputShape: Shape;
  /**
   * Pools require every window to overlap the input (each pad smaller than the kernel extent);
   * convolution allows any padding.
   */
  readonly padsBelowExtent: boolean;
}

/** Checks window attributes against the input and returns the window with its output size. */
export function checkWindow2d(
  kernel: readonly number[],
  strides: readonly number[],
  pads: readonly number[],
  dilations: readonly number[],
  ceilMode: boolean,
  c: WindowCheck,
): { window: Window2d; out: [number, number] } {
  const k = pairAttr('kernel', kernel, 1, 'positive');
  const s = pairAttr('strides', strides, 1, 'positive');
  const d = pairAttr('dilations', dilations, 1, 'positive');
  if (pads.length !== 4) {
    throw new ShapeError(`pads ${formatShape(pads)} must have 4 entries (top, left, bottom, right), got ${pads.length}`);
  }
  if (pads.some((p) => p < 0)) throw new ShapeError(`pads ${formatShape(pads)} must be non-negative`);
  const p: [number, number, number, number] = [pads[0]!, pads[1]!, pads[2]!, pads[3]!];
  const ext = [kernelExtent(k[0], d[0]), kernelExtent(k[1], d[1])];
  const padded = [c.input[0] + p[0] + p[2], c.input[1] + p[1] + p[3]];
  if (ext[0]! > padded[0]! || ext[1]! > padded[1]!) {
    throw new ShapeError(
      `kernel extent ${ext[0]}x${ext[1]} is larger than the padded input ${padded[0]}x${padded[1]} (input ${formatShape(c.inputShape)}, pads ${formatShape(p)})`,
    );
  }
  if (c.padsBelowExtent) {
    const big = p.findIndex((v, i) => v >= ext[i % 2]!);
    if (big >= 0) {
      throw new ShapeError(
        `pads ${formatShape(p)} must each be smaller than the kernel extent ${ext[0]}x${ext[1]}, or a window would cover only padding`,
      );
    }
  }
  const window: Window2d = { kernel: k, strides: s, pads: p, dilations: d, ceilMode };
  const out: [number, number] = [
    windowOutputLength(c.input[0], k[0], s[0], p[0], p[2], d[0], ceilMode),
    windowOutputLength(c.input[1], k[1], s[1], p[1], p[3], d[1], ceilMode),
  ];
  return { window, out };
}

/**
 * Tap indices of one window along one dimension that land inside [0, input): the first tap
 * `lo`, the end `hi` (exclusive, in taps) and the input index of tap t is start + t * dilation.
 */
export function tapRange(start: number, kernel: number, dilation: number, input: number): { lo: number; hi: number } {
  // first t with start + t*d >= 0, last t with start + t*d < input
  const lo = start >= 0 ? 0 : Math.ceil(-start / dilation);
  const hi = Math.min(kernel, Math.floor((input - 1 - start) / dilation) + 1);
  return { lo, hi: Math.max(lo, hi) };
}
