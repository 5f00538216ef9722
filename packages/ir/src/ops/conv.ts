import { Attrs } from '../attributes.js';
import { dtypeShortName, isFloat } from '../dtype.js';
import { storeConverter } from '../kernels/elementwise.js';
import { Window2d, checkWindow2d, tapRange } from '../kernels/window.js';
import type { GraphBuilder } from '../builder.js';
import type { Value } from '../graph.js';
import { GradContext, OpDef, defineOp } from '../opdef.js';
import { ShapeError, TensorType, formatShape } from '../shape.js';
import { Tensor, allocData } from '../tensor.js';
import { padOrCrop } from './gradutil.js';

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
  // PopLibs plans it as the backward pass (PopART's ConvDataGradOp)
  return b.op('conv2d', [gz, wt], { dilations: [...d], groups: G }, { annotations: { ...b.annotations, convPass: 'bwd' } });
}

/**
 * The weight gradient as its own op (PopART's ConvWeightsGradOp, PopLibs' calculateWeightDeltas
 * of the forward ConvParams): operands dy [N,M,OH,OW] and x [N,C,H,W], the forward attributes and
 * the weight shape. Checks the shapes and returns the forward plan.
 */
function planWeightsGrad(types: readonly TensorType[], attrs: Attrs): ConvPlan {
  const [dy, x] = types as [TensorType, TensorType];
  if (dy.dtype !== x.dtype) throw new ShapeError(`operand types differ: ${dtypeShortName(dy.dtype)}, ${dtypeShortName(x.dtype)} (insert a cast)`);
  const ws = attrs['weight_shape'] as number[];
  if (ws.length !== 4) throw new ShapeError(`weight_shape ${formatShape(ws)} must have 4 entries [M,C/groups,kH,kW]`);
  if (ws.some((d) => !Number.isInteger(d) || d < 1)) throw new ShapeError(`weight_shape ${formatShape(ws)} must be positive`);
  const plan = planConv([x, { dtype: x.dtype, shape: ws }], attrs);
  if (dy.shape.length !== 4 || dy.shape.some((d, i) => d !== plan.outShape[i])) {
    throw new ShapeError(
      `dy ${formatShape(dy.shape)} must have the forward result's shape ${formatShape(plan.outShape)} (input ${formatShape(x.shape)}, weight ${formatShape(ws)})`,
    );
  }
  return plan;
}

/**
 * dw[m,c,i,j] = Σ_{n,oh,ow} dy[n,m,oh,ow]·x[n, g·Cg + c, oh·s - pad + i·d, ow·s - pad + j·d] (g the
 * group of m), taps on padding adding nothing; summed in float64 in the order n, oh, ow, rounded once.
 */
function convWeightsGradKernel(dy: Tensor, x: Tensor, ws: readonly number[], plan: ConvPlan): Tensor {
  const [N, C, H, W] = x.shape as [number, number, number, number];
  const [M, Cg, KH, KW] = ws as [number, number, number, number];
  const [, , OH, OW] = plan.outShape;
  const { strides, pads, dilations } = plan.window;
  const Mg = M / plan.groups;
  const out = allocData(x.dtype, M * Cg * KH * KW);
  const conv = storeConverter(x.dtype);
  const gd = dy.data;
  const xd = x.data;
  let o = 0;
  for (let m = 0; m < M; m++) {
    const c0 = Math.floor(m / Mg) * Cg;
    for (let c = 0; c < Cg; c++) {
      for (let i = 0; i < KH; i++) {
        for (let j = 0; j < KW; j++) {
          let acc = 0;
          for (let n = 0; n < N; n++) {
            const xBase = (n * C + c0 + c) * H;
            const gBase = (n * M + m) * OH;
            for (let oh = 0; oh < OH; oh++) {
              const h = oh * strides[0] - pads[0] + i * dilations[0];
              if (h < 0 || h >= H) continue;
              const xRow = (xBase + h) * W;
              const gRow = (gBase + oh) * OW;
              for (let ow = 0; ow < OW; ow++) {
                const w = ow * strides[1] - pads[1] + j * dilations[1];
                if (w >= 0 && w < W) acc += gd[gRow + ow]! * xd[xRow + w]!;
              }
            }
          }
          out[o++] = conv ? conv(acc) : acc;
        }
      }
    }
  }
  return new Tensor(x.dtype, [M, Cg, KH, KW], out);
}

/** The forward attributes of a convolution (for the ops its gradient makes). */
function forwardAttrs(attrs: Attrs) {
  return {
    strides: [...(attrs['strides'] as number[])],
    pads: [...(attrs['pads'] as number[])],
    dilations: [...(attrs['dilations'] as number[])],
    groups: attrs['groups'] as number,
  };
}

function convGrad({ b, op, inputs, outputGrads }: GradContext): (Value | undefined)[] {
  const g = outputGrads[0];
  if (!g) return inputs.map(() => undefined);
  const [x, w, bias] = inputs as [Value, Value, Value | undefined];
  const plan = planConv(inputs.map((v) => v.type), op.attrs);
  return [
    convInputGrad(b, g, w, x.type.shape, plan),
    b.op('conv2d_weights_grad', [g, x], { ...forwardAttrs(op.attrs), weight_shape: [...w.type.shape] }),
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

/**
 * Both operands enter the result linearly: with gw the gradient of dw, the gradient of dy is the
 * forward convolution of x with gw, and that of x the input gradient of that convolution at dy.
 */
function convWeightsGradGrad({ b, op, inputs, outputGrads }: GradContext): (Value | undefined)[] {
  const gw = outputGrads[0];
  if (!gw) return [undefined, undefined];
  const [dy, x] = inputs as [Value, Value];
  const plan = planWeightsGrad([dy.type, x.type], op.attrs);
  const attrs = forwardAttrs(op.attrs);
  return [b.op('conv2d', [x, gw], attrs), convInputGrad(b, dy, gw, x.type.shape, plan)];
}

export const conv2d_weights_grad = defineOp({
  name: 'conv2d_weights_grad',
  family: 'conv',
  doc: 'Gradient of conv2d with respect to its weight (PopART ConvWeightsGradOp, PopLibs calculateWeightDeltas): from dy[N,M,OH,OW] and the forward input x[N,C,H,W], with the forward strides, pads, dilations and groups, dw[M,C/groups,kH,kW] of weight_shape.',
  operands: [{ name: 'dy' }, { name: 'x' }],
  attrs: {
    strides: { type: 'ints', default: [1, 1] },
    pads: { type: 'ints', default: [0, 0, 0, 0], doc: 'top, left, bottom, right' },
    dilations: { type: 'ints', default: [1, 1] },
    groups: { type: 'int', default: 1 },
    weight_shape: { type: 'ints', doc: 'shape [M,C/groups,kH,kW] of the forward weight' },
  },
  infer: (types, attrs) => {
    planWeightsGrad(types, attrs);
    return [{ dtype: types[1]!.dtype, shape: [...(attrs['weight_shape'] as number[])] }];
  },
  kernel: (inputs, attrs) => {
    const plan = planWeightsGrad(inputs, attrs);
    return [convWeightsGradKernel(inputs[0]!, inputs[1]!, attrs['weight_shape'] as number[], plan)];
  },
  grad: convWeightsGradGrad,
  saves: { operands: [0, 1] },
});

export const CONV_OPS: OpDef[] = [conv2d, conv2d_weights_grad];
