import { Attrs } from '../attributes.js';
import { dtypeShortName, isFloat } from '../dtype.js';
import { storeConverter } from '../kernels/elementwise.js';
import { Window, checkWindow, forEachTap, forEachWindowPosition, rowMajorStrides } from '../kernels/window.js';
import type { GraphBuilder } from '../builder.js';
import type { Value } from '../graph.js';
import { GradContext, OpDef, defineOp } from '../opdef.js';
import { ShapeError, TensorType, formatShape, numElements } from '../shape.js';
import { Tensor, allocData } from '../tensor.js';
import { padOrCrop, zerosShaped } from './gradutil.js';

/** Convolution over any number (at least one) of spatial dimensions: N, C, spatial... layout. */

interface ConvPlan {
  readonly window: Window;
  readonly groups: number;
  /** Spatial sizes of the input. */
  readonly field: readonly number[];
  readonly outShape: readonly number[];
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
  if (xs.length < 3) throw new ShapeError(`input must have rank 3 or more [N,C,spatial...], got ${formatShape(xs)}`);
  if (ws.length !== xs.length) {
    throw new ShapeError(`weight ${formatShape(ws)} must have rank ${xs.length} [M,C/groups,kernel...] like input ${formatShape(xs)}, got rank ${ws.length}`);
  }
  const groups = attrs['groups'] as number;
  const [n, c] = xs as [number, number];
  const [m, cg] = ws as [number, number];
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
  const field = xs.slice(2);
  const { window, out } = checkWindow(ws.slice(2), attrs['strides'] as number[], attrs['pads'] as number[], attrs['dilations'] as number[], false, {
    input: field,
    inputShape: xs,
    padsBelowExtent: false,
  });
  return { window, groups, field, outShape: [n, m, ...out] };
}

/**
 * The taps of every output position of one plane: taps[first[o] .. first[o+1]) are the flat
 * input offsets `inAt` and kernel offsets `kAt` of output position o's window inside the input,
 * row-major in kernel order (shared by every sample and channel).
 */
interface TapTable {
  readonly first: Int32Array;
  readonly inAt: Int32Array;
  readonly kAt: Int32Array;
}

function tapTable(plan: ConvPlan, kernel: readonly number[]): TapTable {
  const out = plan.outShape.slice(2);
  const outN = numElements(out);
  const first = new Int32Array(outN + 1);
  const inAt: number[] = [];
  const kAt: number[] = [];
  const inStrides = rowMajorStrides(plan.field);
  const kStrides = rowMajorStrides(kernel);
  forEachWindowPosition(plan.field, out, plan.window, (p) => {
    forEachTap(p, plan.window, inStrides, kStrides, (io, ko) => {
      inAt.push(io);
      kAt.push(ko);
    });
    first[p.o + 1] = inAt.length;
  });
  return { first, inAt: Int32Array.from(inAt), kAt: Int32Array.from(kAt) };
}

/** y[n,m,o] = b[m] + Σ_{c, taps} x·w, summed in float64 in the order c, then kernel position. */
function convKernel(x: Tensor, w: Tensor, bias: Tensor | undefined, plan: ConvPlan): Tensor {
  const [N, C] = x.shape as [number, number];
  const [M, Cg] = w.shape as [number, number];
  const inN = numElements(plan.field);
  const kN = numElements(w.shape.slice(2));
  const outN = numElements(plan.outShape.slice(2));
  const { first, inAt, kAt } = tapTable(plan, w.shape.slice(2));
  const Mg = M / plan.groups;
  const out = allocData(x.dtype, N * M * outN);
  const conv = storeConverter(x.dtype);
  const xd = x.data;
  const wd = w.data;
  let o = 0;
  for (let n = 0; n < N; n++) {
    for (let m = 0; m < M; m++) {
      const c0 = Math.floor(m / Mg) * Cg;
      const b = bias ? bias.data[m]! : 0;
      for (let p = 0; p < outN; p++) {
        const t0 = first[p]!;
        const t1 = first[p + 1]!;
        let acc = b;
        for (let c = 0; c < Cg; c++) {
          const xBase = (n * C + c0 + c) * inN;
          const wBase = (m * Cg + c) * kN;
          for (let t = t0; t < t1; t++) acc += xd[xBase + inAt[t]!]! * wd[wBase + kAt[t]!]!;
        }
        out[o++] = conv ? conv(acc) : acc;
      }
    }
  }
  return new Tensor(x.dtype, plan.outShape, out);
}

// ---- gradient ----

/**
 * Gradient of the input: a transposed convolution, dx[h] = Σ_i gz'[h + i·d]·wt[i] in every spatial
 * dimension, with wt the spatially flipped weights whose in/out channels are swapped within each
 * group, and gz' the output gradient spread out by the strides (s-1 zeros after each element) and
 * padded by lead = (k-1)·d - pad_begin in front. Without strides that is one stride-1 convolution
 * (dilation d) of gz (PopART's ConvDataGradOp). With strides, most of gz' would be zeros, so each
 * phase h = a + s·t of dx is its own convolution: only the taps i with (a + i·d - lead) divisible
 * by s meet an element of gz, and they read gz (not spread out) at t + e_0 + j·δ (δ = d / gcd(s, d))
 * through the sub-kernel wt[i_0 + j·σ] (σ = s / gcd(s, d)). The same taps in the same order as the
 * spread-out correlation, without its zeros (a zero tap adds nothing), at 1/s of its work per dimension;
 * the phases are interleaved back by concatenation (views) and the overhang cropped.
 */
function convInputGrad(b: GraphBuilder, g: Value, w: Value, xShape: readonly number[], plan: ConvPlan): Value {
  const field = xShape.slice(2);
  const rank = field.length;
  const [M, Cg] = w.type.shape as [number, number];
  const kernel = w.type.shape.slice(2);
  const [N] = plan.outShape as [number];
  const out = plan.outShape.slice(2);
  const { strides: s, pads, dilations: d } = plan.window;
  const G = plan.groups;
  const axes = kernel.map((_, i) => i + 2);
  let wt = kernel.some((k) => k > 1)
    ? b.op('slice', [w], { starts: kernel.map(() => -1), ends: kernel.map((k) => -(k + 1)), axes, steps: kernel.map(() => -1) })
    : w;
  // [G·Mg, Cg, k...] -> [G·Cg, Mg, k...]
  wt = b.op('reshape', [wt], { shape: [G, M / G, Cg, ...kernel] });
  wt = b.op('transpose', [wt], { perm: [0, 2, 1, ...kernel.map((_, i) => i + 3)] });
  wt = b.op('reshape', [wt], { shape: [G * Cg, M / G, ...kernel] });
  const lead = kernel.map((k, i) => (k - 1) * d[i]! - pads[i]!);
  // PopLibs plans it as the backward pass (PopART's ConvDataGradOp)
  const annotations = { annotations: { ...b.annotations, convPass: 'bwd' as const } };
  /** The stride-1 correlation of gz with `kernelOf`'s taps, front/back padding (negative: a crop) and dilation per dimension. */
  const correlate = (kernelOf: Value, front: readonly number[], back: readonly number[], dil: readonly number[]): Value => {
    const ownPads = front.every((p) => p >= 0) && back.every((p) => p >= 0);
    const gz = ownPads ? g : padOrCrop(b, g, [0, 0, ...front], [0, 0, ...back]);
    const padding = ownPads ? { pads: [...front, ...back] } : {};
    return b.op('convolution', [gz, kernelOf], { dilations: [...dil], groups: G, ...padding }, annotations);
  };
  if (s.every((v) => v === 1)) {
    const trail = kernel.map((k, i) => field[i]! + (k - 1) * d[i]! - lead[i]! - out[i]!);
    return correlate(wt, lead, trail, d);
  }
  // per dimension and phase a: the first tap i0, the tap spacing σ, the number of taps J, where
  // they start in gz (e0) and their spacing there (δ); T rows of every phase (the last may overhang)
  const T = field.map((h, i) => Math.ceil(h / s[i]!));
  const gcd = (x: number, y: number): number => (y === 0 ? x : gcd(y, x % y));
  const phasesOf = (i: number) =>
    Array.from({ length: s[i]! }, (_, a) => {
      const k = kernel[i]!;
      const sigma = s[i]! / gcd(s[i]!, d[i]!);
      let i0 = 0;
      while (i0 < k && (a + i0 * d[i]! - lead[i]!) % s[i]! !== 0) i0++;
      const J = i0 < k ? Math.floor((k - 1 - i0) / sigma) + 1 : 0;
      const e0 = (a + i0 * d[i]! - lead[i]!) / s[i]!;
      const delta = d[i]! / gcd(s[i]!, d[i]!);
      // padded gz: -e0 in front, then the rest of T + (J - 1)·δ
      const front = -e0;
      const back = T[i]! + (J - 1) * delta - out[i]! - front;
      // no tap ever meets gz: the phase is zero
      const meets = J > 0 && e0 + T[i]! - 1 + (J - 1) * delta >= 0 && e0 < out[i]!;
      return { i0, sigma, J, delta, front, back, meets };
    });
  const perDim = field.map((_, i) => phasesOf(i));
  const unit = [N, G * Cg, ...T.flatMap((t) => [t, 1])];
  /** The phases from dimension i on, for the phases `chosen` of the dimensions before it, interleaved along the axes 2i+3, ... */
  const build = (i: number, chosen: ReturnType<typeof phasesOf>): Value => {
    if (i === rank) {
      if (chosen.some((p) => !p.meets)) return zerosShaped(b, g, unit);
      const sub = chosen.every((p, j) => p.J === kernel[j] && p.sigma === 1)
        ? wt
        : b.op('slice', [wt], {
            starts: chosen.map((p) => p.i0),
            ends: chosen.map((p) => p.i0 + (p.J - 1) * p.sigma + 1),
            axes,
            steps: chosen.map((p) => p.sigma),
          });
      const phase = correlate(sub, chosen.map((p) => p.front), chosen.map((p) => p.back), chosen.map((p) => p.delta));
      return b.op('reshape', [phase], { shape: unit });
    }
    const parts = perDim[i]!.map((p) => build(i + 1, [...chosen, p]));
    return parts.length === 1 ? parts[0]! : b.op('concat', parts, { axis: 3 + 2 * i });
  };
  let dx = build(0, []);
  dx = b.op('reshape', [dx], { shape: [N, G * Cg, ...T.map((t, i) => t * s[i]!)] });
  return T.some((t, i) => t * s[i]! !== field[i]!) ? b.op('slice', [dx], { starts: field.map(() => 0), ends: [...field], axes }) : dx;
}

/**
 * The weight gradient as its own op (PopART's ConvWeightsGradOp, PopLibs' calculateWeightDeltas
 * of the forward ConvParams): operands dy [N,M,out...] and x [N,C,in...], the forward attributes and
 * the weight shape. Checks the shapes and returns the forward plan.
 */
function planWeightsGrad(types: readonly TensorType[], attrs: Attrs): ConvPlan {
  const [dy, x] = types as [TensorType, TensorType];
  if (dy.dtype !== x.dtype) throw new ShapeError(`operand types differ: ${dtypeShortName(dy.dtype)}, ${dtypeShortName(x.dtype)} (insert a cast)`);
  const ws = attrs['weight_shape'] as number[];
  if (ws.length !== x.shape.length) {
    throw new ShapeError(`weight_shape ${formatShape(ws)} must have ${x.shape.length} entries [M,C/groups,kernel...] like input ${formatShape(x.shape)}`);
  }
  if (ws.some((d) => !Number.isInteger(d) || d < 1)) throw new ShapeError(`weight_shape ${formatShape(ws)} must be positive`);
  const plan = planConv([x, { dtype: x.dtype, shape: ws }], attrs);
  if (dy.shape.length !== plan.outShape.length || dy.shape.some((d, i) => d !== plan.outShape[i])) {
    throw new ShapeError(
      `dy ${formatShape(dy.shape)} must have the forward result's shape ${formatShape(plan.outShape)} (input ${formatShape(x.shape)}, weight ${formatShape(ws)})`,
    );
  }
  return plan;
}

/**
 * dw[m,c,k] = Σ_{n,o} dy[n,m,o]·x[n, g·Cg + c, o·s - pad + k·d] (g the group of m), taps on
 * padding adding nothing; summed in float64 in the order n, then output position, rounded once.
 */
function convWeightsGradKernel(dy: Tensor, x: Tensor, ws: readonly number[], plan: ConvPlan): Tensor {
  const [N, C] = x.shape as [number, number];
  const [M, Cg] = ws as [number, number];
  const kernel = ws.slice(2);
  const inN = numElements(plan.field);
  const kN = numElements(kernel);
  const outN = numElements(plan.outShape.slice(2));
  const { first, inAt, kAt } = tapTable(plan, kernel);
  const Mg = M / plan.groups;
  const acc = new Float64Array(M * Cg * kN);
  const gd = dy.data;
  const xd = x.data;
  for (let m = 0; m < M; m++) {
    const c0 = Math.floor(m / Mg) * Cg;
    for (let c = 0; c < Cg; c++) {
      const wBase = (m * Cg + c) * kN;
      for (let n = 0; n < N; n++) {
        const xBase = (n * C + c0 + c) * inN;
        const gBase = (n * M + m) * outN;
        for (let p = 0; p < outN; p++) {
          const gv = gd[gBase + p]!;
          for (let t = first[p]!; t < first[p + 1]!; t++) acc[wBase + kAt[t]!]! += gv * xd[xBase + inAt[t]!]!;
        }
      }
    }
  }
  const out = allocData(x.dtype, acc.length);
  const conv = storeConverter(x.dtype);
  for (let i = 0; i < acc.length; i++) out[i] = conv ? conv(acc[i]!) : acc[i]!;
  return new Tensor(x.dtype, [...ws], out);
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
    b.op('convolution_weights_grad', [g, x], { ...forwardAttrs(op.attrs), weight_shape: [...w.type.shape] }),
    ...(bias ? [b.op('reduce_sum', [g], { axes: [0, ...plan.field.map((_, i) => i + 2)] })] : []),
  ];
}

const windowAttrs = {
  strides: { type: 'ints', default: [], doc: 'one per spatial dimension; empty: all 1' },
  pads: { type: 'ints', default: [], doc: 'all begins, then all ends (2-D: top, left, bottom, right); empty: none' },
  dilations: { type: 'ints', default: [], doc: 'one per spatial dimension; empty: all 1' },
  groups: { type: 'int', default: 1 },
} as const;

export const convolution = defineOp({
  name: 'convolution',
  family: 'conv',
  doc: 'Convolution (cross-correlation) over 1, 2, 3 or more spatial dimensions: x[N,C,spatial...], weight[M,C/groups,kernel...], optional bias[M].',
  operands: [{ name: 'x' }, { name: 'weight' }, { name: 'bias', optional: true }],
  attrs: windowAttrs,
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
  return [b.op('convolution', [x, gw], attrs), convInputGrad(b, dy, gw, x.type.shape, plan)];
}

export const convolution_weights_grad = defineOp({
  name: 'convolution_weights_grad',
  family: 'conv',
  doc: 'Gradient of convolution with respect to its weight (PopART ConvWeightsGradOp, PopLibs calculateWeightDeltas): from dy[N,M,out...] and the forward input x[N,C,in...], with the forward strides, pads, dilations and groups, dw[M,C/groups,kernel...] of weight_shape.',
  operands: [{ name: 'dy' }, { name: 'x' }],
  attrs: {
    ...windowAttrs,
    weight_shape: { type: 'ints', doc: 'shape [M,C/groups,kernel...] of the forward weight' },
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

export const CONV_OPS: OpDef[] = [convolution, convolution_weights_grad];
