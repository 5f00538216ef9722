import { Attrs } from '../attributes.js';
import { dtypeShortName, isFloat } from '../dtype.js';
import { storeConverter } from '../kernels/elementwise.js';
import { Window2d, checkWindow2d, tapRange } from '../kernels/window.js';
import { OpDef, defineOp } from '../opdef.js';
import { ShapeError, TensorType, formatShape } from '../shape.js';
import { Tensor, allocData } from '../tensor.js';

/** Convolution. */

interface ConvPlan {
  readonly window: Window2d;
  readonly groups: number;
  readonly outShape: [number, number, number, number];
}

function planConv(types: readonly TensorType[], attrs: Attrs): ConvPlan {
  const [x, w, bias] = types;
  for (const t of types) {
    if (t.dtype !== x!.dtype) {
      throw new ShapeError(`operand types differ: ${types.map((u) => dtypeShortName(u.dtype)).join(', ')} (insert a cast)`);
    }
  }
  if (!isFloat(x!.dtype)) throw new ShapeError(`operands must be float, got ${dtypeShortName(x!.dtype)}`);
  const xs = x!.shape;
  const ws = w!.shape;
  if (xs.length !== 4) throw new ShapeError(`input must have rank 4 [N,C,H,W], got ${formatShape(xs)}`);
  if (ws.length !== 4) throw new ShapeError(`weight must have rank 4 [M,C/groups,kH,kW], got ${formatShape(ws)}`);
  const groups = attrs['groups'] as number;
  const [n, c, h, wd] = xs as [number, number, number, number];
  const [m, cg, kh, kw] = ws as [number, number, number, number];
  if (groups < 1) throw new ShapeError(`groups must be positive, got ${groups}`);
  if (c % groups !== 0) throw new ShapeError(`groups ${groups} does not divide the ${c} input channels of ${formatShape(xs)}`);
  if (m % groups !== 0) throw new ShapeError(`groups ${groups} does not divide the ${m} output channels of weight ${formatShape(ws)}`);
  if (cg !== c / groups) {
    throw new ShapeError(
      `weight ${formatShape(ws)} has ${cg} input channels per group but input ${formatShape(xs)} with groups ${groups} has ${c / groups}`,
    );
  }
  if (bias && (bias.shape.length !== 1 || bias.shape[0] !== m)) {
    throw new ShapeError(`bias ${formatShape(bias.shape)} must have shape [${m}] (the output channels of weight ${formatShape(ws)})`);
  }
  const { window, out } = checkWindow2d([kh, kw], attrs['strides'] as number[], attrs['pads'] as number[], attrs['dilations'] as number[], false, {
    input: [h, wd],
    inputShape: xs,
    padsBelowExtent: false,
  });
  return { window, groups, outShape: [n, m, out[0], out[1]] };
}

function convKernel(x: Tensor, w: Tensor, bias: Tensor | undefined, plan: ConvPlan): Tensor {
  const [N, C, H, W] = x.shape as [number, number, number, number];
  const [M, Cg, KH, KW] = w.shape as [number, number, number, number];
  const [, , OH, OW] = plan.outShape;
  const { strides, pads, dilations } = plan.window;
  const Mg = M / plan.groups;
  const out = allocData(x.dtype, N * M * OH * OW);
  const conv = storeConverter(x.dtype);
  const xd = x.data;
  const wd = w.data;
  let o = 0;
  for (let n = 0; n < N; n++) {
    for (let m = 0; m < M; m++) {
      const c0 = Math.floor(m / Mg) * Cg;
      const b = bias ? bias.data[m]! : 0;
      for (let oh = 0; oh < OH; oh++) {
        const h0 = oh * strides[0] - pads[0];
        const th = tapRange(h0, KH, dilations[0], H);
        for (let ow = 0; ow < OW; ow++) {
          const w0 = ow * strides[1] - pads[1];
          const tw = tapRange(w0, KW, dilations[1], W);
          let acc = b;
          for (let c = 0; c < Cg; c++) {
            const xBase = (n * C + c0 + c) * H;
            const wBase = (m * Cg + c) * KH;
            for (let i = th.lo; i < th.hi; i++) {
              const xRow = (xBase + h0 + i * dilations[0]) * W + w0;
              const wRow = (wBase + i) * KW;
              for (let j = tw.lo; j < tw.hi; j++) acc += xd[xRow + j * dilations[1]]! * wd[wRow + j]!;
            }
          }
          out[o++] = conv ? conv(acc) : acc;
        }
      }
    }
  }
  return new Tensor(x.dtype, plan.outShape, out);
}

export const conv2d = defineOp({
  name: 'conv2d',
  family: 'conv',
  doc: '2-D convolution (cross-correlation) in NCHW: x[N,C,H,W], weight[M,C/groups,kH,kW], optional bias[M]; pads are (top, left, bottom, right).',
  operands: [{ name: 'x' }, { name: 'weight' }, { name: 'bias', optional: true }],
  attrs: {
    strides: { type: 'ints', default: [1, 1] },
    pads: { type: 'ints', default: [0, 0, 0, 0], doc: 'top, left, bottom, right' },
    dilations: { type: 'ints', default: [1, 1] },
    groups: { type: 'int', default: 1 },
  },
  infer: (types, attrs) => {
    const plan = planConv(types, attrs);
    return [{ dtype: types[0]!.dtype, shape: [...plan.outShape] }];
  },
  kernel: (inputs, attrs) => {
    const plan = planConv(inputs, attrs);
    return [convKernel(inputs[0]!, inputs[1]!, inputs[2], plan)];
  },
});

export const CONV_OPS: OpDef[] = [conv2d];
