import { Attrs } from '../attributes.js';
import { dtypeShortName, isFloat } from '../dtype.js';
import { storeConverter } from '../kernels/elementwise.js';
import { Window2d, checkWindow2d, tapRange } from '../kernels/window.js';
import { OpDef, defineOp } from '../opdef.js';
import { Shape, ShapeError, TensorType, formatShape, numElements, shapesEqual } from '../shape.js';
import { Tensor, allocData } from '../tensor.js';
import { scalarLike } from './gradutil.js';

/** Pooling over the spatial dimensions of NCHW tensors. */

function checkFloat(t: TensorType): void {
  if (!isFloat(t.dtype)) throw new ShapeError(`input must be float, got ${dtypeShortName(t.dtype)}`);
}

function planPool(x: TensorType, attrs: Attrs, dilations: readonly number[]): { window: Window2d; outShape: number[] } {
  checkFloat(x);
  if (x.shape.length !== 4) throw new ShapeError(`input must have rank 4 [N,C,H,W], got ${formatShape(x.shape)}`);
  const [n, c, h, w] = x.shape as [number, number, number, number];
  const { window, out } = checkWindow2d(attrs['kernel'] as number[], attrs['strides'] as number[], attrs['pads'] as number[], dilations, attrs['ceil_mode'] as boolean, {
    input: [h, w],
    inputShape: x.shape,
    padsBelowExtent: true,
  });
  return { window, outShape: [n, c, out[0], out[1]] };
}

/**
 * Calls `visit(o, taps, count, clipped)` for each output element o in order: taps[0..count) are
 * the flat input offsets of the window's taps that fall inside the input (row-major), and
 * `clipped` is the window's area clipped to the padded input (torch's count_include_pad divisor).
 */
function forEachWindow(
  inShape: Shape,
  window: Window2d,
  outShape: Shape,
  visit: (o: number, taps: readonly number[], count: number, clipped: number) => void,
): void {
  const [N, C, H, W] = inShape as [number, number, number, number];
  const OH = outShape[2]!;
  const OW = outShape[3]!;
  const { kernel, strides, pads, dilations } = window;
  const taps = new Array<number>(kernel[0] * kernel[1]);
  let o = 0;
  for (let plane = 0; plane < N * C; plane++) {
    const base = plane * H * W;
    for (let oh = 0; oh < OH; oh++) {
      const h0 = oh * strides[0] - pads[0];
      const th = tapRange(h0, kernel[0], dilations[0], H);
      // window rows within the padded input [-top, H + bottom): count_include_pad's divisor
      const hClip = Math.min(h0 + (kernel[0] - 1) * dilations[0] + 1, H + pads[2]) - h0;
      for (let ow = 0; ow < OW; ow++) {
        const w0 = ow * strides[1] - pads[1];
        const tw = tapRange(w0, kernel[1], dilations[1], W);
        const wClip = Math.min(w0 + (kernel[1] - 1) * dilations[1] + 1, W + pads[3]) - w0;
        let count = 0;
        for (let i = th.lo; i < th.hi; i++) {
          const row = base + (h0 + i * dilations[0]) * W + w0;
          for (let j = tw.lo; j < tw.hi; j++) taps[count++] = row + j * dilations[1];
        }
        visit(o++, taps, count, hClip * wClip);
      }
    }
  }
}

/** Stores `reduce(data, taps, count, clipped)` for each output element (see forEachWindow). */
function poolKernel(
  x: Tensor,
  window: Window2d,
  outShape: readonly number[],
  reduce: (data: ArrayLike<number>, taps: readonly number[], count: number, clipped: number) => number,
): Tensor {
  const out = allocData(x.dtype, numElements(outShape));
  const conv = storeConverter(x.dtype);
  forEachWindow(x.shape, window, outShape, (o, taps, count, clipped) => {
    const v = reduce(x.data, taps, count, clipped);
    out[o] = conv ? conv(v) : v;
  });
  return new Tensor(x.dtype, outShape, out);
}

/** The max pool's winner of a window: the first tap holding the pooled value (NaN matches NaN). */
function winnerTap(data: ArrayLike<number>, taps: readonly number[], count: number, pooled: number): number {
  for (let t = 0; t < count; t++) {
    const v = data[taps[t]!]!;
    if (v === pooled || (Number.isNaN(v) && Number.isNaN(pooled))) return taps[t]!;
  }
  return -1;
}

/** Sums the window contributions `share(o, t)` into a float64 buffer shaped like the input, then stores. */
function scatterWindows(
  dtype: Tensor['dtype'],
  inShape: Shape,
  window: Window2d,
  outShape: Shape,
  add: (o: number, taps: readonly number[], count: number, clipped: number, acc: Float64Array) => void,
): Tensor {
  const acc = new Float64Array(numElements(inShape));
  forEachWindow(inShape, window, outShape, (o, taps, count, clipped) => add(o, taps, count, clipped, acc));
  const out = allocData(dtype, acc.length);
  const conv = storeConverter(dtype);
  for (let i = 0; i < acc.length; i++) out[i] = conv ? conv(acc[i]!) : acc[i]!;
  return new Tensor(dtype, inShape, out);
}

function checkGradShape(what: string, dy: TensorType, want: Shape, input: Shape): void {
  if (!shapesEqual(dy.shape, want)) {
    throw new ShapeError(`${what} ${formatShape(dy.shape)} must have the pooled shape ${formatShape(want)} of input ${formatShape(input)}`);
  }
}

const windowAttrs = {
  kernel: { type: 'ints', doc: 'kernel height and width' },
  strides: { type: 'ints', default: [1, 1] },
  pads: { type: 'ints', default: [0, 0, 0, 0], doc: 'top, left, bottom, right' },
} as const;

const maxAttrs = {
  ...windowAttrs,
  dilations: { type: 'ints', default: [1, 1] },
  ceil_mode: { type: 'bool', default: false },
} as const;

const avgAttrs = {
  ...windowAttrs,
  ceil_mode: { type: 'bool', default: false },
  count_include_pad: { type: 'bool', default: false },
} as const;

/** Attributes of `attrs` named in `spec` (to pass a pool's window on to its gradient op). */
function pick(attrs: Readonly<Record<string, unknown>>, spec: object): Record<string, never> {
  return Object.fromEntries(Object.keys(spec).map((k) => [k, attrs[k]])) as Record<string, never>;
}

export const maxpool2d = defineOp({
  name: 'maxpool2d',
  family: 'pool',
  doc: 'Maximum over 2-D windows of x[N,C,H,W]; padding never wins (it is -inf). ceil_mode keeps a last partial window that starts inside the input or leading padding.',
  operands: [{ name: 'x' }],
  attrs: maxAttrs,
  infer: ([x], attrs) => [{ dtype: x!.dtype, shape: planPool(x!, attrs, attrs['dilations'] as number[]).outShape }],
  kernel: ([x], attrs) => {
    const { window, outShape } = planPool(x!, attrs, attrs['dilations'] as number[]);
    return [
      poolKernel(x!, window, outShape, (data, taps, count) => {
        let m = -Infinity;
        for (let t = 0; t < count; t++) {
          const v = data[taps[t]!]!;
          if (v > m || Number.isNaN(v)) m = v;
          if (Number.isNaN(m)) break;
        }
        return m;
      }),
    ];
  },
  grad: ({ b, op, inputs, outputs, outputGrads }) => {
    const g = outputGrads[0];
    return [g ? b.op('maxpool2d_grad', [inputs[0]!, outputs[0]!, g], pick(op.attrs, maxAttrs)) : undefined];
  },
  saves: { operands: [0], results: [0] },
});

export const maxpool2d_grad = defineOp({
  name: 'maxpool2d_grad',
  family: 'pool',
  doc: 'Gradient of maxpool2d: dx gets each window\'s dy at the first tap (row-major) equal to the pooled value y, summed over overlapping windows (torch routes ties to the first maximum).',
  operands: [
    { name: 'x', differentiable: false },
    { name: 'y', differentiable: false },
    { name: 'dy' },
  ],
  attrs: maxAttrs,
  infer: ([x, y, dy], attrs) => {
    const { outShape } = planPool(x!, attrs, attrs['dilations'] as number[]);
    for (const t of [y!, dy!]) {
      if (t.dtype !== x!.dtype) throw new ShapeError(`operand types differ: ${dtypeShortName(x!.dtype)} and ${dtypeShortName(t.dtype)} (insert a cast)`);
    }
    checkGradShape('y', y!, outShape, x!.shape);
    checkGradShape('dy', dy!, outShape, x!.shape);
    return [{ dtype: x!.dtype, shape: [...x!.shape] }];
  },
  kernel: ([x, y, dy], attrs) => {
    const { window, outShape } = planPool(x!, attrs, attrs['dilations'] as number[]);
    return [
      scatterWindows(x!.dtype, x!.shape, window, outShape, (o, taps, count, _clipped, acc) => {
        const t = winnerTap(x!.data, taps, count, y!.data[o]!);
        if (t >= 0) acc[t]! += dy!.data[o]!;
      }),
    ];
  },
  // its gradient with respect to dy would gather at each window's winner: no op does that yet
  grad: 'none',
});

export const avgpool2d = defineOp({
  name: 'avgpool2d',
  family: 'pool',
  doc: 'Mean over 2-D windows of x[N,C,H,W]. count_include_pad divides by the window size clipped to the padded input (torch); otherwise by the number of input elements in the window.',
  operands: [{ name: 'x' }],
  attrs: avgAttrs,
  infer: ([x], attrs) => [{ dtype: x!.dtype, shape: planPool(x!, attrs, [1, 1]).outShape }],
  kernel: ([x], attrs) => {
    const { window, outShape } = planPool(x!, attrs, [1, 1]);
    const includePad = attrs['count_include_pad'] as boolean;
    return [
      poolKernel(x!, window, outShape, (data, taps, count, clipped) => {
        let s = 0;
        for (let t = 0; t < count; t++) s += data[taps[t]!]!;
        return s / (includePad ? clipped : count);
      }),
    ];
  },
  grad: ({ b, op, inputs, outputGrads }) => {
    const g = outputGrads[0];
    return [g ? b.op('avgpool2d_grad', [g], { ...pick(op.attrs, avgAttrs), input_shape: [...inputs[0]!.type.shape] }) : undefined];
  },
  saves: {},
});

export const avgpool2d_grad = defineOp({
  name: 'avgpool2d_grad',
  family: 'pool',
  doc: 'Gradient of avgpool2d for an input of shape input_shape: each window\'s dy divided by its divisor and added to every input element of the window.',
  operands: [{ name: 'dy' }],
  attrs: { ...avgAttrs, input_shape: { type: 'ints', doc: 'shape [N,C,H,W] of the pooled input' } },
  infer: ([dy], attrs) => {
    const input = { dtype: dy!.dtype, shape: attrs['input_shape'] as number[] };
    const { outShape } = planPool(input, attrs, [1, 1]);
    checkGradShape('dy', dy!, outShape, input.shape);
    return [input];
  },
  kernel: ([dy], attrs) => {
    const inShape = attrs['input_shape'] as number[];
    const { window, outShape } = planPool({ dtype: dy!.dtype, shape: inShape }, attrs, [1, 1]);
    const includePad = attrs['count_include_pad'] as boolean;
    return [
      scatterWindows(dy!.dtype, inShape, window, outShape, (o, taps, count, clipped, acc) => {
        const share = dy!.data[o]! / (includePad ? clipped : count);
        for (let t = 0; t < count; t++) acc[taps[t]!]! += share;
      }),
    ];
  },
  // linear in dy, and avgpool2d is its adjoint
  grad: ({ b, op, outputGrads }) => {
    const g = outputGrads[0];
    return [g ? b.op('avgpool2d', [g], pick(op.attrs, avgAttrs)) : undefined];
  },
  saves: {},
});

export const global_avg_pool = defineOp({
  name: 'global_avg_pool',
  family: 'pool',
  doc: 'Mean over all spatial dimensions: x[N,C,...] → [N,C,1,...,1].',
  operands: [{ name: 'x' }],
  attrs: {},
  infer: ([x]) => {
    checkFloat(x!);
    if (x!.shape.length < 2) throw new ShapeError(`input must have rank 2 or more [N,C,...], got ${formatShape(x!.shape)}`);
    const s = x!.shape;
    if (s.length > 2 && numElements(s.slice(2)) === 0) throw new ShapeError(`input ${formatShape(s)} has an empty spatial extent`);
    return [{ dtype: x!.dtype, shape: [s[0]!, s[1]!, ...s.slice(2).map(() => 1)] }];
  },
  kernel: ([x]) => {
    const s = x!.shape;
    const planes = s[0]! * s[1]!;
    const size = numElements(s.slice(2));
    const out = allocData(x!.dtype, planes);
    const conv = storeConverter(x!.dtype);
    for (let p = 0; p < planes; p++) {
      let acc = 0;
      for (let i = 0; i < size; i++) acc += x!.data[p * size + i]!;
      const v = acc / size;
      out[p] = conv ? conv(v) : v;
    }
    return [new Tensor(x!.dtype, [s[0]!, s[1]!, ...s.slice(2).map(() => 1)], out)];
  },
  grad: ({ b, inputs, outputGrads }) => {
    const g = outputGrads[0];
    if (!g) return [undefined];
    const x = inputs[0]!;
    const size = numElements(x.type.shape.slice(2));
    const spread = b.op('expand', [g], { shape: [...x.type.shape] });
    return [b.op('mul', [spread, scalarLike(b, g, 1 / size)])];
  },
  saves: {},
});

export const POOL_OPS: OpDef[] = [maxpool2d, maxpool2d_grad, avgpool2d, avgpool2d_grad, global_avg_pool];
