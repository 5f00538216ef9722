import { Attrs } from '../attributes.js';
import { DType, dtypeShortName, integerRange, isFloat, isInteger } from '../dtype.js';
import { storeConverter } from '../kernels/elementwise.js';
import { forEachReduction, reducedShape, reductionAxes } from '../kernels/reduce.js';
import { GradContext, OpDef, defineOp } from '../opdef.js';
import { broadcastToShape, restoreReducedAxes, scalarLike } from './gradutil.js';
import { Shape, ShapeError, TensorType, formatShape, normalizeAxis } from '../shape.js';
import { Tensor, allocData } from '../tensor.js';
import type { Value } from '../graph.js';

/**
 * Reductions over a set of axes (reduce_*) and argmax. `axes=[]` reduces every axis. Integer
 * sums and products wrap modulo 2^32 as the device does; a reduction over no elements gives the
 * operation's identity (sum 0, prod 1, max -inf or the dtype's lowest value, min +inf or the
 * highest, mean NaN).
 */

type Kind = 'float' | 'numeric' | 'any';

function checkKind(t: DType, kind: Kind, op: string): void {
  if (kind === 'float' && !isFloat(t)) throw new ShapeError(`operand type ${dtypeShortName(t)} is not a float type (${op} needs float; insert a cast)`);
  if (kind === 'numeric' && t === 'bool') throw new ShapeError(`operand type bool is not a numeric type (insert a cast)`);
}

/** Normalised, sorted reduction axes of `shape`; a scalar accepts axis 0 / -1 and reduces nothing. */
export function resolveReduceAxes(axes: readonly number[], shape: Shape): number[] {
  const rank = shape.length;
  for (const a of axes) {
    if (!Number.isInteger(a) || a < -Math.max(rank, 1) || a >= Math.max(rank, 1)) {
      throw new ShapeError(`axis ${a} is out of range for input ${formatShape(shape)} (rank ${rank})`);
    }
  }
  return rank === 0 ? [] : reductionAxes(axes, rank);
}

interface Reducer {
  /** Value of a reduction over no elements. */
  init: (t: DType) => number;
  /** Accumulates one element; `t` lets integer dtypes wrap. */
  step: (acc: number, x: number, t: DType) => number;
  finish?: (acc: number, count: number) => number;
}


function wrap(x: number, t: DType): number {
  return t === 'int32' ? x | 0 : t === 'uint32' ? x >>> 0 : x;
}

const REDUCERS: Record<string, Reducer> = {
  reduce_sum: { init: () => 0, step: (a, x, t) => wrap(a + x, t) },
  reduce_mean: { init: () => 0, step: (a, x) => a + x, finish: (a, n) => a / n },
  reduce_prod: {
    init: () => 1,
    step: (a, x, t) => (isFloat(t) ? a * x : wrap(Math.imul(a, x), t)),
  },
  reduce_max: {
    init: (t) => (isInteger(t) ? integerRange(t)[0] : t === 'bool' ? 0 : -Infinity),
    step: (a, x) => (Number.isNaN(a) || Number.isNaN(x) ? NaN : x > a ? x : a),
  },
  reduce_min: {
    init: (t) => (isInteger(t) ? integerRange(t)[1] : t === 'bool' ? 1 : Infinity),
    step: (a, x) => (Number.isNaN(a) || Number.isNaN(x) ? NaN : x < a ? x : a),
  },
};

/** Normalised axes and keepdims of a reduce_* op in a gradient rule. */
function reduceOf(ctx: GradContext): { axes: number[]; keepdims: boolean } {
  return {
    axes: resolveReduceAxes(ctx.op.attrs['axes'] as number[], ctx.inputs[0]!.type.shape),
    keepdims: ctx.op.attrs['keepdims'] as boolean,
  };
}

/** d sum: the result's gradient broadcast over the reduced axes. */
function sumGrad(ctx: GradContext): (Value | undefined)[] {
  const g = ctx.outputGrads[0];
  const x = ctx.inputs[0]!;
  if (!g || !isFloat(x.type.dtype)) return [undefined];
  const { axes, keepdims } = reduceOf(ctx);
  return [broadcastToShape(ctx.b, restoreReducedAxes(ctx.b, g, axes, keepdims), x.type.shape)];
}

/** d mean: as sum, divided by the number of elements each result averages (divided, as the forward does). */
function meanGrad(ctx: GradContext): (Value | undefined)[] {
  const g = ctx.outputGrads[0];
  const x = ctx.inputs[0]!;
  if (!g) return [undefined];
  const { axes, keepdims } = reduceOf(ctx);
  const count = axes.reduce((n, a) => n * x.type.shape[a]!, 1);
  const b = ctx.b;
  // over no elements the operand is empty, so any finite scale gives the (empty) gradient
  const scaled = b.op('div', [restoreReducedAxes(b, g, axes, keepdims), scalarLike(b, g, count || 1)]);
  return [broadcastToShape(b, scaled, x.type.shape)];
}

/**
 * d max / d min (PyTorch amax/amin): the gradient goes to the elements equal to the result,
 * split evenly among ties.
 */
function extremumGrad(ctx: GradContext): (Value | undefined)[] {
  const g = ctx.outputGrads[0];
  const x = ctx.inputs[0]!;
  if (!g || !isFloat(x.type.dtype)) return [undefined];
  const { axes, keepdims } = reduceOf(ctx);
  const b = ctx.b;
  const y = restoreReducedAxes(b, ctx.outputs[0]!, axes, keepdims);
  const hit = b.op('cast', [b.op('equal', [x, y])], { to: x.type.dtype });
  const ties = b.op('reduce_sum', [hit], { axes, keepdims: true });
  const share = b.op('div', [restoreReducedAxes(b, g, axes, keepdims), ties]);
  return [b.op('mul', [hit, share])];
}

/**
 * d prod without dividing by zero: each element gets the product of the others. With no zero in
 * its group that is prod/x; with exactly one zero, the zero gets the product of the non-zero
 * elements and the rest 0; with two or more zeros everything is 0. Zeros are replaced by 1 before
 * dividing, so no inf or NaN appears even in the branches `where` discards (which would poison
 * second derivatives).
 */
function prodGrad(ctx: GradContext): (Value | undefined)[] {
  const g = ctx.outputGrads[0];
  const x = ctx.inputs[0]!;
  if (!g || !isFloat(x.type.dtype)) return [undefined];
  const { axes, keepdims } = reduceOf(ctx);
  const b = ctx.b;
  const zero = scalarLike(b, x, 0);
  const one = scalarLike(b, x, 1);
  const isZero = b.op('equal', [x, zero]);
  const safe = b.op('where', [isZero, one, x]);
  const nonZeroProd = b.op('reduce_prod', [safe], { axes, keepdims: true });
  const zeroCount = b.op('reduce_sum', [b.op('cast', [isZero], { to: x.type.dtype })], { axes, keepdims: true });
  const gp = b.op('mul', [restoreReducedAxes(b, g, axes, keepdims), nonZeroProd]);
  const atZero = b.op('where', [b.op('equal', [zeroCount, one]), gp, zero]);
  const atOther = b.op('where', [b.op('equal', [zeroCount, zero]), b.op('div', [gp, safe]), zero]);
  return [broadcastToShape(b, b.op('where', [isZero, atZero, atOther]), x.type.shape)];
}

const GRADS: Record<string, { grad: (ctx: GradContext) => (Value | undefined)[]; saves: { operands?: number[]; results?: number[] } }> = {
  reduce_sum: { grad: sumGrad, saves: {} },
  reduce_mean: { grad: meanGrad, saves: {} },
  reduce_max: { grad: extremumGrad, saves: { operands: [0], results: [0] } },
  reduce_min: { grad: extremumGrad, saves: { operands: [0], results: [0] } },
  reduce_prod: { grad: prodGrad, saves: { operands: [0] } },
};

function reduction(name: string, doc: string, kind: Kind): OpDef {
  const r = REDUCERS[name]!;
  return defineOp({
    name,
    family: 'reduce',
    doc,
    operands: [{ name: 'x' }],
    attrs: {
      axes: { type: 'ints', default: [], doc: 'axes to reduce (negative count from the end); empty reduces all' },
      keepdims: { type: 'bool', default: false, doc: 'keep reduced axes as size-1 dims' },
    },
    infer: ([x], attrs) => {
      checkKind(x!.dtype, kind, name);
      const axes = resolveReduceAxes(attrs['axes'] as number[], x!.shape);
      return [{ dtype: x!.dtype, shape: reducedShape(x!.shape, axes, attrs['keepdims'] as boolean) }];
    },
    kernel: ([x], attrs) => {
      const t = x!.dtype;
      const axes = resolveReduceAxes(attrs['axes'] as number[], x!.shape);
      const shape = reducedShape(x!.shape, axes, attrs['keepdims'] as boolean);
      const outCount = shape.reduce((n, d) => n * d, 1);
      const out = allocData(t, outCount);
      const conv = storeConverter(t);
      const src = x!.data;
      forEachReduction(x!.shape, axes, (o, offs) => {
        let acc = r.init(t);
        for (const off of offs) acc = r.step(acc, src[off]!, t);
        if (r.finish) acc = r.finish(acc, offs.length);
        out[o] = conv ? conv(acc) : acc;
      });
      return [new Tensor(t, shape, out)];
    },
    grad: GRADS[name]!.grad,
    saves: GRADS[name]!.saves,
  });
}

export const reduceSum = reduction('reduce_sum', 'sum over axes (integers wrap modulo 2^32)', 'numeric');
export const reduceMean = reduction('reduce_mean', 'mean over axes (float only; NaN over no elements)', 'float');
export const reduceMax = reduction('reduce_max', 'maximum over axes (NaN propagates; bool: any)', 'any');
export const reduceMin = reduction('reduce_min', 'minimum over axes (NaN propagates; bool: all)', 'any');
export const reduceProd = reduction('reduce_prod', 'product over axes (integers wrap modulo 2^32)', 'numeric');

function argmaxAxis(shape: Shape, axis: number): number {
  return shape.length === 0 ? 0 : normalizeAxis(axis, shape.length);
}

export const argmax = defineOp({
  name: 'argmax',
  family: 'reduce',
  doc: 'index of the maximum along an axis (int32); NaN counts as the maximum; ties go to the first index unless select_last_index',
  operands: [{ name: 'x', differentiable: false }],
  attrs: {
    axis: { type: 'int', default: 0 },
    keepdims: { type: 'bool', default: false },
    select_last_index: { type: 'bool', default: false, doc: 'on ties, pick the last index instead of the first' },
  },
  infer: ([x], attrs: Attrs): TensorType[] => {
    const shape = x!.shape;
    const axis = attrs['axis'] as number;
    if (!Number.isInteger(axis) || axis < -Math.max(shape.length, 1) || axis >= Math.max(shape.length, 1)) {
      throw new ShapeError(`axis ${axis} is out of range for input ${formatShape(shape)} (rank ${shape.length})`);
    }
    const a = argmaxAxis(shape, axis);
    if (shape.length > 0 && shape[a] === 0) {
      throw new ShapeError(`cannot take the argmax over axis ${axis} of size 0 in ${formatShape(shape)}`);
    }
    return [{ dtype: 'int32', shape: shape.length === 0 ? [] : reducedShape(shape, [a], attrs['keepdims'] as boolean) }];
  },
  kernel: ([x], attrs) => {
    const shape = x!.shape;
    const a = argmaxAxis(shape, attrs['axis'] as number);
    const axes = shape.length === 0 ? [] : [a];
    const outShape = shape.length === 0 ? [] : reducedShape(shape, axes, attrs['keepdims'] as boolean);
    const selectLast = attrs['select_last_index'] as boolean;
    const out = new Int32Array(outShape.reduce((n, d) => n * d, 1));
    const src = x!.data;
    if (shape.length > 0 && shape[a] === 0 && out.length > 0) throw new Error(`argmax: axis ${a} of ${formatShape(shape)} is empty`);
    forEachReduction(shape, axes, (o, offs) => {
      let best = 0;
      let bv = src[offs[0]!]!;
      for (let j = 1; j < offs.length; j++) {
        const v = src[offs[j]!]!;
        if (Number.isNaN(bv)) {
          // NaN is the maximum: only a later NaN can take over, and only when ties go last
          if (selectLast && Number.isNaN(v)) best = j;
          continue;
        }
        if (Number.isNaN(v) || v > bv || (selectLast && v === bv)) {
          best = j;
          bv = v;
        }
      }
      out[o] = best;
    });
    return [new Tensor('int32', outShape, out)];
  },
  grad: 'none',
});

export const REDUCE_OPS: OpDef[] = [reduceSum, reduceMean, reduceMax, reduceMin, reduceProd, argmax];
