import { Attrs } from '../attributes.js';
import { DType, dtypeShortName, isFloat } from '../dtype.js';
import { storeConverter } from '../kernels/elementwise.js';
import { KernelContext, OpDef, defineOp } from '../opdef.js';
import { counterBits, dropoutScale, normalFromBits, uniformFromBits } from '../random.js';
import { ShapeError, TensorType, formatShape, numElements } from '../shape.js';
import { Tensor, allocData } from '../tensor.js';

/**
 * Ops drawing random numbers. Element i depends only on the op's `seed` attribute, the run's
 * seed, the step counter and i (a counter-based generator, see counterBits), so the reference and
 * the device agree however the elements are spread over tiles, and dropout masks change from step
 * to step. Values are computed in float32, as on the device, then rounded to the result type.
 */

/** Scrambles the run seed (murmur3 finaliser) so that it and the op seed do not cancel trivially. */
export function mixSeed(seed: number): number {
  let h = seed >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/** The draw of element `index` of a random op with seed attribute `seed`, in this run and step. */
export function opBits(seed: number, ctx: KernelContext, index: number): number {
  return counterBits((seed ^ mixSeed(ctx.seed)) >>> 0, ctx.step >>> 0, index);
}

function checkFloat(t: DType, what: string): void {
  if (!isFloat(t)) throw new ShapeError(`${what} ${dtypeShortName(t)} is not a float type`);
}

export const dropout = defineOp({
  name: 'dropout',
  family: 'random',
  doc: 'training: zeroes each element with probability ratio and scales the rest by 1/(1-ratio); results [y, mask]. Not training: identity with an all-true mask',
  operands: [{ name: 'x' }],
  attrs: {
    ratio: { type: 'float', default: 0.5, doc: 'probability of dropping an element, in [0, 1]' },
    seed: { type: 'int', default: 0 },
    training: { type: 'bool', default: true },
  },
  infer: ([x], attrs) => {
    checkFloat(x!.dtype, 'operand type');
    const ratio = attrs['ratio'] as number;
    if (!(ratio >= 0 && ratio <= 1)) throw new ShapeError(`ratio ${ratio} is not in [0, 1]`);
    return [
      { dtype: x!.dtype, shape: [...x!.shape] },
      { dtype: 'bool', shape: [...x!.shape] },
    ];
  },
  kernel: ([x], attrs, ctx) => {
    const ratio = attrs['ratio'] as number;
    const n = x!.size;
    const mask = new Uint8Array(n);
    if (!(attrs['training'] as boolean) || ratio === 0) {
      mask.fill(1);
      return [x!, new Tensor('bool', x!.shape, mask)];
    }
    const seed = attrs['seed'] as number;
    const scale = dropoutScale(ratio);
    const out = allocData(x!.dtype, n);
    const conv = storeConverter(x!.dtype);
    const src = x!.data;
    const wide = x!.dtype === 'float64';
    for (let i = 0; i < n; i++) {
      const keep = uniformFromBits(opBits(seed, ctx, i)) >= ratio ? 1 : 0;
      mask[i] = keep;
      // multiply rather than select so that NaN and inf stay visible, as torch does
      // float32 as on the device; a float64 tensor (gradient checks) keeps its precision
      const kept = wide ? src[i]! * scale : Math.fround(src[i]! * scale);
      const v = keep ? kept : src[i]! * 0;
      out[i] = conv ? conv(v) : v;
    }
    return [new Tensor(x!.dtype, x!.shape, out), new Tensor('bool', x!.shape, mask)];
  },
  grad: (ctx) => {
    const g = ctx.outputGrads[0];
    if (!g) return [undefined];
    const ratio = ctx.op.attrs['ratio'] as number;
    if (!(ctx.op.attrs['training'] as boolean) || ratio === 0) return [g];
    const b = ctx.b;
    // the same mask and scale as the forward (ratio 1 keeps nothing and scales by 0)
    const kept = b.op('mul', [g, b.op('cast', [ctx.outputs[1]!], { to: g.type.dtype })]);
    return [b.op('mul', [kept, b.scalar(g.type.dtype, ratio === 1 ? 0 : 1 / (1 - ratio))])];
  },
  saves: { results: [1] },
});

function declared(attrs: Attrs): TensorType {
  const dtype = attrs['dtype'] as DType;
  const shape = attrs['shape'] as number[];
  checkFloat(dtype, 'dtype');
  if (shape.some((d) => d < 0)) throw new ShapeError(`shape ${formatShape(shape)} has a negative dimension`);
  return { dtype, shape: [...shape] };
}

function randomTensor(attrs: Attrs, ctx: KernelContext, draw: (bits: number) => number): Tensor {
  const t = declared(attrs);
  const seed = attrs['seed'] as number;
  const n = numElements(t.shape);
  const out = allocData(t.dtype, n);
  const conv = storeConverter(t.dtype);
  for (let i = 0; i < n; i++) {
    const v = draw(opBits(seed, ctx, i));
    out[i] = conv ? conv(v) : v;
  }
  return new Tensor(t.dtype, t.shape, out);
}

export const randomNormal = defineOp({
  name: 'random_normal',
  family: 'random',
  doc: 'a tensor of normally distributed values (mean, std), drawn afresh each step',
  operands: [],
  attrs: {
    dtype: { type: 'dtype' },
    shape: { type: 'ints' },
    mean: { type: 'float', default: 0 },
    std: { type: 'float', default: 1 },
    seed: { type: 'int', default: 0 },
  },
  typeFromAttrs: true,
  infer: (_t, attrs) => {
    const std = attrs['std'] as number;
    if (!(std >= 0)) throw new ShapeError(`std ${std} is negative`);
    return [declared(attrs)];
  },
  kernel: (_in, attrs, ctx) => {
    const mean = Math.fround(attrs['mean'] as number);
    const std = Math.fround(attrs['std'] as number);
    return [randomTensor(attrs, ctx, (bits) => Math.fround(mean + Math.fround(std * normalFromBits(bits))))];
  },
  grad: 'none',
});

export const randomUniform = defineOp({
  name: 'random_uniform',
  family: 'random',
  doc: 'a tensor of values uniform in [low, high), drawn afresh each step',
  operands: [],
  attrs: {
    dtype: { type: 'dtype' },
    shape: { type: 'ints' },
    low: { type: 'float', default: 0 },
    high: { type: 'float', default: 1 },
    seed: { type: 'int', default: 0 },
  },
  typeFromAttrs: true,
  infer: (_t, attrs) => {
    const low = attrs['low'] as number;
    const high = attrs['high'] as number;
    if (!(low <= high)) throw new ShapeError(`low ${low} is greater than high ${high}`);
    return [declared(attrs)];
  },
  kernel: (_in, attrs, ctx) => {
    const low = attrs['low'] as number;
    const range = Math.fround((attrs['high'] as number) - low);
    return [randomTensor(attrs, ctx, (bits) => Math.fround(Math.fround(low) + Math.fround(range * uniformFromBits(bits))))];
  },
  grad: 'none',
});

export const RANDOM_OPS: OpDef[] = [dropout, randomNormal, randomUniform];
