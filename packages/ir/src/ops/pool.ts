import { Attrs } from '../attributes.js';
import { dtypeShortName, isFloat } from '../dtype.js';
import { storeConverter } from '../kernels/elementwise.js';
import { Window2d, checkWindow2d, tapRange } from '../kernels/window.js';
import { OpDef, defineOp } from '../opdef.js';
import { ShapeError, TensorType, formatShape, numElements } from '../shape.js';
import { Tensor, allocData } from '../tensor.js';

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
 * Stores `reduce(data, taps, count, clipped)` for each output element: taps[0..count) are the
 * flat input offsets of the window's taps that fall inside the input, and `clipped` is the
 * window's area clipped to the padded input (torch's count_include_pad divisor).
 */
function poolKernel(
  x: Tensor,
  window: Window2d,
  outShape: readonly number[],
  reduce: (data: ArrayLike<number>, taps: readonly number[], count: number, clipped: number) => number,
): Tensor {
  const [N, C, H, W] = x.shape as [number, number, number, number];
  const OH = outShape[2]!;
  const OW = outShape[3]!;
  const { kernel, strides, pads, dilations } = window;
  const out = allocData(x.dtype, numElements(outShape));
  const conv = storeConverter(x.dtype);
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
        const v = reduce(x.data, taps, count, hClip * wClip);
        out[o++] = conv ? conv(v) : v;
      }
    }
  }
  return new Tensor(x.dtype, outShape, out);
}

const windowAttrs = {
  kernel: { type: 'ints', doc: 'kernel height and width' },
  strides: { type: 'ints', default: [1, 1] },
  pads: { type: 'ints', default: [0, 0, 0, 0], doc: 'top, left, bottom, right' },
} as const;

export const maxpool2d = defineOp({
  name: 'maxpool2d',
  family: 'pool',
  doc: 'Maximum over 2-D windows of x[N,C,H,W]; padding never wins (it is -inf). ceil_mode keeps a last partial window that starts inside the input or leading padding.',
  operands: [{ name: 'x' }],
  attrs: {
    ...windowAttrs,
    dilations: { type: 'ints', default: [1, 1] },
    ceil_mode: { type: 'bool', default: false },
  },
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
});

export const avgpool2d = defineOp({
  name: 'avgpool2d',
  family: 'pool',
  doc: 'Mean over 2-D windows of x[N,C,H,W]. count_include_pad divides by the window size clipped to the padded input (torch); otherwise by the number of input elements in the window.',
  operands: [{ name: 'x' }],
  attrs: {
    ...windowAttrs,
    ceil_mode: { type: 'bool', default: false },
    count_include_pad: { type: 'bool', default: false },
  },
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
});

export const POOL_OPS: OpDef[] = [maxpool2d, avgpool2d, global_avg_pool];
