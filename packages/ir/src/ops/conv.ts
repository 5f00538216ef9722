import { Attrs } from '../attributes.js';
import { dtypeShortName, isFloat } from '../dtype.js';
import { storeConverter } from '../kernels/elementwise.js';
import { Window2d, checkWindow2d, tapRange } from '../kernels/window.js';
import type { GraphBuilder } from '../builder.js';
import type { Value } from '../graph.js';
import { GradContext, OpDef, defineOp } from '../opdef.js';
import { ShapeError, TensorType, formatShape } from '../shape.js';
import { Tensor, allocData } from '../tensor.js';
import { padOrCrop, zerosLike } from './gradutil.js';

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

// ---- gradient ----

/**
 * Gradient of the input: a transposed convolution. g is spread out by the strides (stride-1
 * zeros after each element), padded by (k-1)·d - pad_begin in front and to H + (k-1)·d in all,
 * then correlated (stride 1, dilation d) with the spatially flipped weights whose in/out channels
 * are swapped within each group: dx[h] = Σ_i gz[h + pad - i·d]·w[i].
 */
function convInputGrad(b: GraphBuilder, g: Value, w: Value, xShape: readonly number[], plan: ConvPlan): Value {
  const [, , H, W] = xShape as [number, number, number, number];
  const [M, Cg, KH, KW] = w.type.shape as [number, number, number, number];
  const [N, , OH, OW] = plan.outShape;
  const { strides: s, pads, dilations: d } = plan.window;
  const G = plan.groups;
  let gz = g;
  if (s[0] > 1 || s[1] > 1) {
    gz = b.op('reshape', [g], { shape: [N, M, OH, 1, OW, 1] });
    gz = b.op('pad', [gz], { pads: [0, 0, 0, 0, 0, 0, 0, 0, 0, s[0] - 1, 0, s[1] - 1] });
    gz = b.op('reshape', [gz], { shape: [N, M, OH * s[0], OW * s[1]] });
  }
  const lead = [(KH - 1) * d[0] - pads[0], (KW - 1) * d[1] - pads[1]];
  const trail = [H + (KH - 1) * d[0] - lead[0]! - OH * s[0], W + (KW - 1) * d[1] - lead[1]! - OW * s[1]];
  gz = padOrCrop(b, gz, [0, 0, lead[0]!, lead[1]!], [0, 0, trail[0]!, trail[1]!]);
  let wt = KH > 1 || KW > 1 ? b.op('slice', [w], { starts: [-1, -1], ends: [-(KH + 1), -(KW + 1)], axes: [2, 3], steps: [-1, -1] }) : w;
  // [G·Mg, Cg, kh, kw] -> [G·Cg, Mg, kh, kw]
  wt = b.op('reshape', [wt], { shape: [G, M / G, Cg, KH, KW] });
  wt = b.op('transpose', [wt], { perm: [0, 2, 1, 3, 4] });
  wt = b.op('reshape', [wt], { shape: [G * Cg, M / G, KH, KW] });
  return b.op('conv2d', [gz, wt], { dilations: [...d], groups: G });
}

/**
 * Gradient of the weights: dw[m,c,i,j] = Σ_{n,oh,ow} g[n,m,oh,ow]·x[n,c,oh·s - pad + i·d, ...], a
 * convolution of x (samples as channels, each group's channels as the batch) with g as the
 * filter, where the forward strides become dilations and the forward dilations strides.
 */
function convWeightGrad(b: GraphBuilder, g: Value, x: Value, w: Value, plan: ConvPlan): Value {
  const [N, C, H, W] = x.type.shape as [number, number, number, number];
  const [, , KH, KW] = w.type.shape as [number, number, number, number];
  const [, , OH, OW] = plan.outShape;
  const { strides: s, pads, dilations: d } = plan.window;
  const G = plan.groups;
  // padded extent the taps of all windows span
  const span = [(KH - 1) * d[0] + (OH - 1) * s[0] + 1, (KW - 1) * d[1] + (OW - 1) * s[1] + 1];
  // every window inside the leading padding: x does not reach the result
  if (pads[0] >= span[0]! || pads[1] >= span[1]!) return zerosLike(b, w);
  const trail = [span[0]! - H - pads[0], span[1]! - W - pads[1]];
  let xt = padOrCrop(b, x, [0, 0, 0, 0], [0, 0, Math.min(0, trail[0]!), Math.min(0, trail[1]!)]);
  const [Hc, Wc] = xt.type.shape.slice(2) as [number, number];
  // x [N, G·Cg, H, W] -> [Cg, G·N, H, W]
  xt = b.op('reshape', [xt], { shape: [N, G, C / G, Hc, Wc] });
  xt = b.op('transpose', [xt], { perm: [2, 1, 0, 3, 4] });
  xt = b.op('reshape', [xt], { shape: [C / G, G * N, Hc, Wc] });
  // g [N, G·Mg, OH, OW] -> [G·Mg, N, OH, OW]
  const gt = b.op('transpose', [g], { perm: [1, 0, 2, 3] });
  const dw = b.op('conv2d', [xt, gt], {
    strides: [...d],
    dilations: [...s],
    pads: [pads[0], pads[1], Math.max(0, trail[0]!), Math.max(0, trail[1]!)],
    groups: G,
  });
  // [Cg, M, kh, kw] -> [M, Cg, kh, kw]
  return b.op('transpose', [dw], { perm: [1, 0, 2, 3] });
}

function convGrad({ b, op, inputs, outputGrads }: GradContext): (Value | undefined)[] {
  const g = outputGrads[0];
  if (!g) return inputs.map(() => undefined);
  const [x, w, bias] = inputs as [Value, Value, Value | undefined];
  const plan = planConv(inputs.map((v) => v.type), op.attrs);
  return [
    convInputGrad(b, g, w, x.type.shape, plan),
    convWeightGrad(b, g, x, w, plan),
    ...(bias ? [b.op('reduce_sum', [g], { axes: [0, 2, 3] })] : []),
  ];
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
  grad: convGrad,
  saves: { operands: [0, 1] },
});

export const CONV_OPS: OpDef[] = [conv2d];
