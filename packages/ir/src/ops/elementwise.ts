import { Attrs } from '../attributes.js';
import { DType, dtypeShortName, isFloat } from '../dtype.js';
import { mapBinary, mapNary, mapUnary } from '../kernels/elementwise.js';
import { OpDef, defineOp } from '../opdef.js';
import { ShapeError, TensorType, broadcastAll } from '../shape.js';
import { Tensor } from '../tensor.js';
import { erf } from './math.js';

/** Element-wise arithmetic, activations, comparisons, logic and casts, with NumPy broadcasting. */

type Kind = 'float' | 'numeric' | 'bool' | 'any';

function checkKind(op: string, t: DType, kind: Kind): void {
  const ok =
    kind === 'any' ||
    (kind === 'float' && isFloat(t)) ||
    (kind === 'numeric' && t !== 'bool') ||
    (kind === 'bool' && t === 'bool');
  if (!ok) {
    const want = { float: 'a float', numeric: 'a numeric', bool: 'a bool', any: 'any' }[kind];
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
function binary(name: string, doc: string, kind: Kind, f: (x: number, y: number) => number, fi?: (x: number, y: number, t: DType) => number): OpDef {
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

/** Round half to even, as ONNX Round and numpy.round do. */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

export const add = binary('add', 'a + b', 'numeric', (x, y) => x + y);
export const sub = binary('sub', 'a - b', 'numeric', (x, y) => x - y);
export const mul = binary('mul', 'a * b', 'numeric', (x, y) => x * y, intMul);
export const div = binary('div', 'a / b (integer division truncates toward zero)', 'numeric', (x, y) => x / y, intDiv);
export const pow = binary('pow', 'a ** b', 'numeric', (x, y) => Math.pow(x, y), intPow);
export const max = binary('max', 'element-wise maximum (NaN propagates)', 'numeric', (x, y) => (Number.isNaN(x) || Number.isNaN(y) ? NaN : Math.max(x, y)));
export const min = binary('min', 'element-wise minimum (NaN propagates)', 'numeric', (x, y) => (Number.isNaN(x) || Number.isNaN(y) ? NaN : Math.min(x, y)));

export const neg = unary('neg', '-x', 'numeric', (x) => -x);
export const abs = unary('abs', '|x|', 'numeric', (x) => Math.abs(x));
export const exp = unary('exp', 'e ** x', 'float', Math.exp);
export const log = unary('log', 'natural logarithm', 'float', Math.log);
export const sqrt = unary('sqrt', 'square root', 'float', Math.sqrt);
export const reciprocal = unary('reciprocal', '1 / x', 'float', (x) => 1 / x);
export const tanh = unary('tanh', 'hyperbolic tangent', 'float', Math.tanh);
export const sigmoid = unary('sigmoid', '1 / (1 + e ** -x)', 'float', (x) => (x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x))));
export const relu = unary('relu', 'max(x, 0)', 'numeric', (x) => (x > 0 ? x : Number.isNaN(x) ? x : 0));
export const erfOp = unary('erf', 'the error function', 'float', erf);
export const sin = unary('sin', 'sine', 'float', Math.sin);
export const cos = unary('cos', 'cosine', 'float', Math.cos);
export const floor = unary('floor', 'round toward -inf', 'float', Math.floor, { grad: 'none' });
export const ceil = unary('ceil', 'round toward +inf', 'float', Math.ceil, { grad: 'none' });
export const round = unary('round', 'round half to even', 'float', roundHalfEven, { grad: 'none' });
export const sign = unary('sign', '-1, 0 or 1', 'numeric', (x) => (Number.isNaN(x) ? NaN : x > 0 ? 1 : x < 0 ? -1 : 0), { grad: 'none' });

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
});

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
  doc: 'converts to another dtype (float to int truncates toward zero; to bool tests != 0)',
  operands: [{ name: 'x' }],
  attrs: { to: { type: 'dtype' } },
  infer: ([x], attrs) => [{ dtype: attrs['to'] as DType, shape: [...x!.shape] }],
  kernel: ([x], attrs) => {
    const to = attrs['to'] as DType;
    return [mapUnary(x!, to, to === 'uint32' ? (v) => (Number.isNaN(v) ? 0 : Math.trunc(v) >>> 0) : (v) => v)];
  },
});

export const ELEMENTWISE_OPS: OpDef[] = [
  add, sub, mul, div, pow, max, min,
  neg, abs, exp, log, sqrt, reciprocal, tanh, sigmoid, relu, gelu, erfOp, sin, cos, floor, ceil, round, sign,
  clip, where, equal, less, greater, and, or, not, cast,
];

export type { Tensor };
