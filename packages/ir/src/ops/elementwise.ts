import { Attrs } from '../attributes.js';
import { DType, dtypeShortName, isFloat, isInteger, isLowFloat } from '../dtype.js';
import { E8M0Rounding, roundToLowFloat } from '../float-formats.js';
import { mapBinary, mapNary, mapUnary } from '../kernels/elementwise.js';
import type { GraphBuilder } from '../builder.js';
import type { Value } from '../graph.js';
import { GradRule, OpDef, defineOp } from '../opdef.js';
import { ShapeError, TensorType, broadcastAll } from '../shape.js';
import { Tensor } from '../tensor.js';
import { maskLike, mulSum, scalarLike, sumToShape, zerosLike } from './gradutil.js';
import { erf } from './math.js';

/** Element-wise arithmetic, activations, comparisons, logic and casts, with NumPy broadcasting. */

type Kind = 'float' | 'numeric' | 'integer' | 'bool' | 'any';

function checkKind(op: string, t: DType, kind: Kind): void {
  const ok =
    kind === 'any' ||
    (kind === 'float' && isFloat(t)) ||
    (kind === 'numeric' && t !== 'bool') ||
    (kind === 'integer' && isInteger(t)) ||
    (kind === 'bool' && t === 'bool');
  if (!ok) {
    const want = { float: 'a float', numeric: 'a numeric', integer: 'an integer', bool: 'a bool', any: 'any' }[kind];
    throw new ShapeError(`operand type ${dtypeShortName(t)} is not ${want} type`);
  }
}

function sameDType(types: readonly TensorType[]): DType {
  const d = types[0]!.dtype;
  for (const t of types) {
    if (t.dtype !== d) {
      throw new ShapeError(`operand types differ: ${types.map((x) => dtypeShortName(x.dtype)).join(' and ')} (insert a cast)`);
    }
  }
  return d;
}

function unary(name: string, doc: string, kind: Kind, f: (x: number, attrs: Attrs) => number, extra: Partial<OpDef> = {}): OpDef {
  return defineOp({
    name,
    family: 'elementwise',
    doc,
    operands: [{ name: 'x' }],
    attrs: {},
    infer: ([x]) => {
      checkKind(name, x!.dtype, kind);
      return [{ dtype: x!.dtype, shape: [...x!.shape] }];
    },
    kernel: ([x], attrs) => [mapUnary(x!, x!.dtype, (v) => f(v, attrs))],
    ...extra,
  });
}

/** Binary op whose result has the operands' dtype. `fi` is used for integer dtypes when given. */
function binary(
  name: string,
  doc: string,
  kind: Kind,
  f: (x: number, y: number) => number,
  fi: ((x: number, y: number, t: DType) => number) | undefined,
  extra: Partial<OpDef>,
): OpDef {
  return defineOp({
    name,
    family: 'elementwise',
    doc,
    operands: [{ name: 'a' }, { name: 'b' }],
    attrs: {},
    infer: (types) => {
      const d = sameDType(types);
      checkKind(name, d, kind);
      return [{ dtype: d, shape: broadcastAll(types.map((t) => t.shape)) }];
    },
    kernel: ([a, b]) => {
      const t = a!.dtype;
      const g = fi && !isFloat(t) ? (x: number, y: number) => fi(x, y, t) : f;
      return [mapBinary(a!, b!, t, g)];
    },
    ...extra,
  });
}

function comparison(name: string, doc: string, f: (x: number, y: number) => boolean): OpDef {
  return defineOp({
    name,
    family: 'elementwise',
    doc,
    operands: [
      { name: 'a', differentiable: false },
      { name: 'b', differentiable: false },
    ],
    attrs: {},
    infer: (types) => {
      sameDType(types);
      return [{ dtype: 'bool', shape: broadcastAll(types.map((t) => t.shape)) }];
    },
    kernel: ([a, b]) => [mapBinary(a!, b!, 'bool', (x, y) => (f(x, y) ? 1 : 0))],
    grad: 'none',
  });
}

function logical(name: string, doc: string, f: (x: boolean, y: boolean) => boolean): OpDef {
  return defineOp({
    name,
    family: 'elementwise',
    doc,
    operands: [
      { name: 'a', differentiable: false },
      { name: 'b', differentiable: false },
    ],
    attrs: {},
    infer: (types) => {
      for (const t of types) checkKind(name, t.dtype, 'bool');
      return [{ dtype: 'bool', shape: broadcastAll(types.map((t) => t.shape)) }];
    },
    kernel: ([a, b]) => [mapBinary(a!, b!, 'bool', (x, y) => (f(x !== 0, y !== 0) ? 1 : 0))],
    grad: 'none',
  });
}

/** Integer division truncating toward zero (C semantics, as on the device); x/0 gives 0. */
function intDiv(x: number, y: number, t: DType): number {
  if (y === 0) return 0;
  const q = Math.trunc(x / y);
  return t === 'uint32' ? q >>> 0 : q | 0;
}
function intMul(x: number, y: number, t: DType): number {
  return t === 'uint32' ? Math.imul(x, y) >>> 0 : Math.imul(x, y);
}
function intPow(x: number, y: number, t: DType): number {
  let r = 1;
  if (y < 0) return x === 1 ? 1 : x === -1 ? (y % 2 === 0 ? 1 : -1) : 0;
  for (let i = 0; i < y; i++) r = intMul(r, x, t);
  return r;
}

// ---- gradient rules ----

/** A rule given the result's gradient `g`; operands without a gradient get undefined when `g` is absent. */
function rule(f: (b: GraphBuilder, g: Value, xs: readonly Value[], y: Value, attrs: Attrs) => (Value | undefined)[]): GradRule {
  return (ctx) => {
    const g = ctx.outputGrads[0];
    if (!g) return ctx.inputs.map(() => undefined);
    return f(ctx.b, g, ctx.inputs, ctx.outputs[0]!, ctx.op.attrs);
  };
}

/** Unary rule g·f'(x) where `deriv` builds f' from the operand x and the result y. */
function chain(deriv: (b: GraphBuilder, x: Value, y: Value) => Value): GradRule {
  return rule((b, g, [x], y) => [b.op('mul', [g, deriv(b, x!, y)])]);
}

const c = (b: GraphBuilder, like: Value, v: number) => scalarLike(b, like, v);

/** Rounding ops are flat almost everywhere: a zero gradient (torch), so chains through them still work. */
const zeroGrad = {
  grad: rule((b, _g, [x]) => [isFloat(x!.type.dtype) ? zerosLike(b, x!) : undefined]),
  saves: {},
} satisfies Partial<OpDef>;

const SAVES_X = { operands: [0] } as const;
const SAVES_Y = { results: [0] } as const;

/**
 * Mask sending the gradient of max(a, b) (or min) to a: 1 where a wins, 1/2 on ties (torch
 * splits ties evenly), 0 where b wins; b gets 1 - mask.
 */
function winnerMask(b: GraphBuilder, x: Value, y: Value, wins: 'greater' | 'less'): Value {
  const win = maskLike(b, b.op(wins, [x, y]), x);
  const tie = maskLike(b, b.op('equal', [x, y]), x);
  return b.op('add', [win, b.op('mul', [tie, c(b, x, 0.5)])]);
}

function minMaxGrad(wins: 'greater' | 'less'): Partial<OpDef> {
  return {
    grad: rule((b, g, [x, y]) => {
      const m = winnerMask(b, x!, y!, wins);
      const rest = b.op('sub', [c(b, m, 1), m]);
      return [mulSum(b, g, m, x!.type.shape), mulSum(b, g, rest, y!.type.shape)];
    }),
    saves: { operands: [0, 1] },
  };
}

/** Round half to even, as ONNX Round and numpy.round do. */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

export const add = binary('add', 'a + b', 'numeric', (x, y) => x + y, undefined, {
  grad: rule((b, g, [x, y]) => [sumToShape(b, g, x!.type.shape), sumToShape(b, g, y!.type.shape)]),
  saves: {},
});
export const sub = binary('sub', 'a - b', 'numeric', (x, y) => x - y, undefined, {
  grad: rule((b, g, [x, y]) => [sumToShape(b, g, x!.type.shape), b.op('neg', [sumToShape(b, g, y!.type.shape)])]),
  saves: {},
});
export const mul = binary('mul', 'a * b', 'numeric', (x, y) => x * y, intMul, {
  grad: rule((b, g, [x, y]) => [mulSum(b, g, y!, x!.type.shape), mulSum(b, g, x!, y!.type.shape)]),
  saves: { operands: [0, 1] },
});
export const div = binary('div', 'a / b (integer division truncates toward zero)', 'numeric', (x, y) => x / y, intDiv, {
  // d(a/b)/da = 1/b, d(a/b)/db = -(a/b)/b
  grad: rule((b, g, [x, y], q) => {
    const gq = b.op('div', [g, y!]);
    return [sumToShape(b, gq, x!.type.shape), b.op('neg', [mulSum(b, gq, q, y!.type.shape)])];
  }),
  saves: { operands: [1], results: [0] },
});
export const pow = binary('pow', 'a ** b', 'numeric', (x, y) => Math.pow(x, y), intPow, {
  // da = g·b·a^(b-1) (0 where b = 0); db = g·a^b·log(a) (0 where a = 0 and b >= 0), as torch
  grad: rule((b, g, [x, y], r) => {
    const zero = c(b, x!, 0);
    const da = b.op('mul', [y!, b.op('pow', [x!, b.op('sub', [y!, c(b, y!, 1)])])]);
    const daMasked = b.op('where', [b.op('equal', [y!, zero]), zero, da]);
    const db = b.op('mul', [r, b.op('log', [x!])]);
    const flat = b.op('and', [b.op('equal', [x!, zero]), b.op('not', [b.op('less', [y!, zero])])]);
    const dbMasked = b.op('where', [flat, zero, db]);
    return [mulSum(b, g, daMasked, x!.type.shape), mulSum(b, g, dbMasked, y!.type.shape)];
  }),
  saves: { operands: [0, 1], results: [0] },
});
export const max = binary('max', 'element-wise maximum (NaN propagates)', 'numeric', (x, y) => (Number.isNaN(x) || Number.isNaN(y) ? NaN : Math.max(x, y)), undefined, minMaxGrad('greater'));
export const min = binary('min', 'element-wise minimum (NaN propagates)', 'numeric', (x, y) => (Number.isNaN(x) || Number.isNaN(y) ? NaN : Math.min(x, y)), undefined, minMaxGrad('less'));

export const neg = unary('neg', '-x', 'numeric', (x) => -x, { grad: rule((b, g) => [b.op('neg', [g])]), saves: {} });
export const abs = unary('abs', '|x|', 'numeric', (x) => Math.abs(x), { grad: chain((b, x) => b.op('sign', [x])), saves: SAVES_X });
export const exp = unary('exp', 'e ** x', 'float', Math.exp, { grad: chain((_b, _x, y) => y), saves: SAVES_Y });
export const log = unary('log', 'natural logarithm', 'float', Math.log, { grad: rule((b, g, [x]) => [b.op('div', [g, x!])]), saves: SAVES_X });
export const sqrt = unary('sqrt', 'square root', 'float', Math.sqrt, {
  grad: rule((b, g, _xs, y) => [b.op('div', [g, b.op('mul', [y, c(b, y, 2)])])]),
  saves: SAVES_Y,
});
export const reciprocal = unary('reciprocal', '1 / x', 'float', (x) => 1 / x, {
  grad: rule((b, g, _xs, y) => [b.op('neg', [b.op('mul', [g, b.op('mul', [y, y])])])]),
  saves: SAVES_Y,
});
export const tanh = unary('tanh', 'hyperbolic tangent', 'float', Math.tanh, {
  grad: chain((b, _x, y) => b.op('sub', [c(b, y, 1), b.op('mul', [y, y])])),
  saves: SAVES_Y,
});
export const sigmoid = unary('sigmoid', '1 / (1 + e ** -x)', 'float', (x) => (x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x))), {
  grad: chain((b, _x, y) => b.op('mul', [y, b.op('sub', [c(b, y, 1), y])])),
  saves: SAVES_Y,
});
export const relu = unary('relu', 'max(x, 0)', 'numeric', (x) => (x > 0 ? x : Number.isNaN(x) ? x : 0), {
  // gradient where the result is positive (torch's threshold_backward: 0 at x = 0)
  grad: chain((b, _x, y) => maskLike(b, b.op('greater', [y, c(b, y, 0)]), y)),
  saves: SAVES_Y,
});
export const erfOp = unary('erf', 'the error function', 'float', erf, {
  // 2/sqrt(pi)·exp(-x²)
  grad: chain((b, x) => b.op('mul', [c(b, x, 2 / Math.sqrt(Math.PI)), b.op('exp', [b.op('neg', [b.op('mul', [x, x])])])])),
  saves: SAVES_X,
});
export const sin = unary('sin', 'sine', 'float', Math.sin, { grad: chain((b, x) => b.op('cos', [x])), saves: SAVES_X });
export const cos = unary('cos', 'cosine', 'float', Math.cos, { grad: chain((b, x) => b.op('neg', [b.op('sin', [x])])), saves: SAVES_X });
export const floor = unary('floor', 'round toward -inf', 'float', Math.floor, zeroGrad);
export const ceil = unary('ceil', 'round toward +inf', 'float', Math.ceil, zeroGrad);
export const round = unary('round', 'round half to even', 'float', roundHalfEven, zeroGrad);
export const sign = unary('sign', '-1, 0 or 1', 'numeric', (x) => (Number.isNaN(x) ? NaN : x > 0 ? 1 : x < 0 ? -1 : 0), zeroGrad);

export const gelu = defineOp({
  name: 'gelu',
  family: 'elementwise',
  doc: 'Gaussian error linear unit: x·Φ(x), or its tanh approximation',
  operands: [{ name: 'x' }],
  attrs: { approximate: { type: 'string', default: 'none', values: ['none', 'tanh'] } },
  infer: ([x]) => {
    checkKind('gelu', x!.dtype, 'float');
    return [{ dtype: x!.dtype, shape: [...x!.shape] }];
  },
  kernel: ([x], attrs) => {
    const tanhApprox = attrs['approximate'] === 'tanh';
    const c = Math.sqrt(2 / Math.PI);
    return [
      mapUnary(x!, x!.dtype, (v) =>
        tanhApprox ? 0.5 * v * (1 + Math.tanh(c * (v + 0.044715 * v * v * v))) : 0.5 * v * (1 + erf(v / Math.SQRT2)),
      ),
    ];
  },
  grad: rule((b, g, [x], _y, attrs) => [b.op('mul', [g, geluDerivative(b, x!, attrs['approximate'] === 'tanh')])]),
  saves: SAVES_X,
});

function geluDerivative(b: GraphBuilder, x: Value, tanhApprox: boolean): Value {
  const k = (v: number) => c(b, x, v);
  const mul = (p: Value, q: Value) => b.op('mul', [p, q]);
  const add = (p: Value, q: Value) => b.op('add', [p, q]);
  const x2 = mul(x, x);
  if (tanhApprox) {
    // y = x/2·(1 + t), t = tanh(u), u = s·(x + 0.044715·x³): y' = (1 + t)/2 + x/2·(1 - t²)·s·(1 + 3·0.044715·x²)
    const s = Math.sqrt(2 / Math.PI);
    const t = b.op('tanh', [mul(k(s), add(x, mul(k(0.044715), mul(x2, x))))]);
    const du = mul(k(s), add(k(1), mul(k(3 * 0.044715), x2)));
    const sech2 = b.op('sub', [k(1), mul(t, t)]);
    return add(mul(k(0.5), add(k(1), t)), mul(mul(k(0.5), x), mul(sech2, du)));
  }
  // y = x·Φ(x): y' = Φ(x) + x·φ(x), Φ(x) = (1 + erf(x/√2))/2, φ(x) = exp(-x²/2)/√(2π)
  const cdf = mul(k(0.5), add(k(1), b.op('erf', [mul(x, k(Math.SQRT1_2))])));
  const pdf = mul(k(1 / Math.sqrt(2 * Math.PI)), b.op('exp', [mul(k(-0.5), x2)]));
  return add(cdf, mul(x, pdf));
}

export const clip = defineOp({
  name: 'clip',
  family: 'elementwise',
  doc: 'min(max(x, min), max); bounds are attributes (absent means unbounded)',
  operands: [{ name: 'x' }],
  attrs: { min: { type: 'float', optional: true }, max: { type: 'float', optional: true } },
  infer: ([x]) => {
    checkKind('clip', x!.dtype, 'numeric');
    return [{ dtype: x!.dtype, shape: [...x!.shape] }];
  },
  kernel: ([x], attrs) => {
    const lo = (attrs['min'] as number | undefined) ?? -Infinity;
    const hi = (attrs['max'] as number | undefined) ?? Infinity;
    return [mapUnary(x!, x!.dtype, (v) => (Number.isNaN(v) ? v : Math.min(Math.max(v, lo), hi)))];
  },
  // passes where min <= x <= max (torch clamp_backward: the bounds themselves pass)
  grad: rule((b, g, [x], _y, attrs) => {
    const lo = attrs['min'] as number | undefined;
    const hi = attrs['max'] as number | undefined;
    const inside: Value[] = [];
    if (lo !== undefined) inside.push(b.op('not', [b.op('less', [x!, c(b, x!, lo)])]));
    if (hi !== undefined) inside.push(b.op('not', [b.op('greater', [x!, c(b, x!, hi)])]));
    if (inside.length === 0) return [g];
    const m = inside.length === 2 ? b.op('and', [inside[0]!, inside[1]!]) : inside[0]!;
    return [b.op('mul', [g, maskLike(b, m, g)])];
  }),
  saves: SAVES_X,
});

export const where = defineOp({
  name: 'where',
  family: 'elementwise',
  doc: 'cond ? a : b, broadcasting all three',
  operands: [{ name: 'cond', differentiable: false }, { name: 'a' }, { name: 'b' }],
  attrs: {},
  infer: ([c, a, b]) => {
    checkKind('where', c!.dtype, 'bool');
    const d = sameDType([a!, b!]);
    return [{ dtype: d, shape: broadcastAll([c!.shape, a!.shape, b!.shape]) }];
  },
  kernel: ([c, a, b]) => [mapNary([c!, a!, b!], a!.dtype, ([cv, av, bv]) => (cv ? av! : bv!))],
  grad: rule((b, g, [cond, x, y]) => {
    const zero = c(b, g, 0);
    return [
      undefined,
      sumToShape(b, b.op('where', [cond!, g, zero]), x!.type.shape),
      sumToShape(b, b.op('where', [cond!, zero, g]), y!.type.shape),
    ];
  }),
  saves: SAVES_X,
});

export const equal = comparison('equal', 'a == b', (x, y) => x === y);
export const less = comparison('less', 'a < b', (x, y) => x < y);
export const greater = comparison('greater', 'a > b', (x, y) => x > y);
export const and = logical('and', 'logical and', (x, y) => x && y);
export const or = logical('or', 'logical or', (x, y) => x || y);

export const not = defineOp({
  name: 'not',
  family: 'elementwise',
  doc: 'logical not',
  operands: [{ name: 'x', differentiable: false }],
  attrs: {},
  infer: ([x]) => {
    checkKind('not', x!.dtype, 'bool');
    return [{ dtype: 'bool', shape: [...x!.shape] }];
  },
  kernel: ([x]) => [mapUnary(x!, 'bool', (v) => (v ? 0 : 1))],
  grad: 'none',
});

export const cast = defineOp({
  name: 'cast',
  family: 'elementwise',
  doc: 'converts to another dtype (float to int truncates toward zero and wraps to the width; to bool tests != 0; to a low-precision float rounds to nearest even)',
  operands: [{ name: 'x' }],
  attrs: {
    to: { type: 'dtype' },
    saturate: { type: 'bool', optional: true, doc: 'float8 targets only: out-of-range values become ±max (absent: true) rather than Inf or NaN' },
    round_mode: { type: 'string', values: ['up', 'down', 'nearest'], optional: true, doc: 'float8e8m0 target only: how to round to a power of two (absent: up)' },
  },
  infer: ([x], attrs) => {
    const to = attrs['to'] as DType;
    if (attrs['saturate'] !== undefined && !(isLowFloat(to) && to.startsWith('float8'))) {
      throw new ShapeError(`saturate applies to casts to float8 types, not to ${dtypeShortName(to)}`);
    }
    if (attrs['round_mode'] !== undefined && to !== 'float8e8m0') throw new ShapeError(`round_mode applies to casts to f8e8m0, not to ${dtypeShortName(to)}`);
    return [{ dtype: to, shape: [...x!.shape] }];
  },
  kernel: ([x], attrs) => {
    const to = attrs['to'] as DType;
    if (isLowFloat(to)) {
      const opts = { saturate: (attrs['saturate'] as boolean | undefined) ?? true, e8m0Rounding: attrs['round_mode'] as E8M0Rounding | undefined };
      return [mapUnary(x!, to, (v) => roundToLowFloat(to, v, opts))];
    }
    return [mapUnary(x!, to, to === 'uint32' ? (v) => (Number.isNaN(v) ? 0 : Math.trunc(v) >>> 0) : (v) => v)];
  },
  // between float types the gradient is cast back; integer and bool results carry none
  grad: rule((b, g, [x], y) => [isFloat(x!.type.dtype) && isFloat(y.type.dtype) ? b.op('cast', [g], { to: x!.type.dtype }) : undefined]),
  saves: {},
});

/** Bits of an int32 or uint32 result, kept in its dtype's range. */
function inDType(v: number, t: DType): number {
  return t === 'uint32' ? v >>> 0 : v | 0;
}

/** Bitwise ops on the two's-complement bits of integers; they have no gradient. */
function bitwise(name: string, doc: string, f: (x: number, y: number) => number): OpDef {
  const operands = [
    { name: 'a', differentiable: false },
    { name: 'b', differentiable: false },
  ];
  return binary(name, doc, 'integer', f, (x, y, t) => inDType(f(x, y), t), { operands, grad: 'none' });
}

export const bitwiseAnd = bitwise('bitwise_and', 'a & b on integers', (x, y) => x & y);
export const bitwiseOr = bitwise('bitwise_or', 'a | b on integers', (x, y) => x | y);
export const bitwiseXor = bitwise('bitwise_xor', 'a ^ b on integers', (x, y) => x ^ y);
export const bitwiseNot = defineOp({
  name: 'bitwise_not',
  family: 'elementwise',
  doc: '~x on integers',
  operands: [{ name: 'x', differentiable: false }],
  attrs: {},
  infer: ([x]) => {
    checkKind('bitwise_not', x!.dtype, 'integer');
    return [{ dtype: x!.dtype, shape: [...x!.shape] }];
  },
  kernel: ([x]) => [mapUnary(x!, x!.dtype, (v) => inDType(~v, x!.dtype))],
  grad: 'none',
});

/** The 32-bit dtypes whose bits bitcast reinterprets. */
const WORD_DTYPES: readonly DType[] = ['float32', 'int32', 'uint32'];

const word = new DataView(new ArrayBuffer(4));

/** The bits of a value of 32-bit dtype `from` read as `to`. */
function reinterpret(v: number, from: DType, to: DType): number {
  if (from === 'float32') word.setFloat32(0, v);
  else if (from === 'int32') word.setInt32(0, v);
  else word.setUint32(0, v);
  return to === 'float32' ? word.getFloat32(0) : to === 'int32' ? word.getInt32(0) : word.getUint32(0);
}

export const bitcast = defineOp({
  name: 'bitcast',
  family: 'elementwise',
  doc: 'the bits of each element read as another 32-bit dtype (float32, int32, uint32)',
  operands: [{ name: 'x', differentiable: false }],
  attrs: { to: { type: 'dtype' } },
  infer: ([x], attrs) => {
    const to = attrs['to'] as DType;
    if (!WORD_DTYPES.includes(x!.dtype) || !WORD_DTYPES.includes(to)) {
      throw new ShapeError(`bitcast reinterprets 32-bit dtypes (f32, i32, u32), not ${dtypeShortName(x!.dtype)} as ${dtypeShortName(to)}`);
    }
    return [{ dtype: to, shape: [...x!.shape] }];
  },
  kernel: ([x], attrs) => [mapUnary(x!, attrs['to'] as DType, (v) => reinterpret(v, x!.dtype, attrs['to'] as DType))],
  grad: 'none',
});

export const ELEMENTWISE_OPS: OpDef[] = [
  add, sub, mul, div, pow, max, min,
  neg, abs, exp, log, sqrt, reciprocal, tanh, sigmoid, relu, gelu, erfOp, sin, cos, floor, ceil, round, sign,
  clip, where, equal, less, greater, and, or, not, cast,
  bitwiseAnd, bitwiseOr, bitwiseXor, bitwiseNot, bitcast,
];

export type { Tensor };
