import { InitSpec, isInitSpec } from '../attributes.js';
import { DType } from '../dtype.js';
import { materializeInit } from '../init.js';
import { defineOp } from '../opdef.js';
import { ShapeError, formatType, shapesEqual } from '../shape.js';
import { Tensor } from '../tensor.js';

/** Ops with no operands: where values enter a graph. */

function declaredType(attrs: Readonly<Record<string, unknown>>) {
  const shape = attrs['shape'] as number[];
  if (shape.some((d) => d < 0)) throw new ShapeError(`shape [${shape.join(',')}] has a negative dimension`);
  return { dtype: attrs['dtype'] as DType, shape };
}

export const input = defineOp({
  name: 'input',
  family: 'source',
  doc: 'Streamed data fed from the host each step (a model input or label).',
  operands: [],
  attrs: { name: { type: 'string' }, dtype: { type: 'dtype' }, shape: { type: 'ints' } },
  typeFromAttrs: true,
  infer: (_t, attrs) => [declaredType(attrs)],
  kernel: () => {
    throw new Error('input values are supplied by the interpreter');
  },
  grad: 'none',
});

export const parameter = defineOp({
  name: 'parameter',
  family: 'source',
  doc: 'A weight: trained, kept on the device between steps, read and written by name.',
  operands: [],
  attrs: {
    name: { type: 'string' },
    dtype: { type: 'dtype' },
    shape: { type: 'ints' },
    init: { type: 'initializer', doc: 'initial value: a tensor, or an initializer with an explicit seed' },
  },
  typeFromAttrs: true,
  infer: (_t, attrs) => {
    const t = declaredType(attrs);
    const init = attrs['init'];
    if (init instanceof Tensor && !shapesEqual(init.shape, t.shape)) {
      throw new ShapeError(`initial value ${formatType(init)} does not match the declared ${formatType(t)}`);
    }
    return [t];
  },
  kernel: (_in, attrs) => [initialParameterValue(attrs)],
  grad: 'none',
});

/** The initial value of a parameter op from its attributes. */
export function initialParameterValue(attrs: Readonly<Record<string, unknown>>): Tensor {
  const init = attrs['init'];
  const dtype = attrs['dtype'] as DType;
  const shape = attrs['shape'] as number[];
  if (init instanceof Tensor) return init.dtype === dtype ? init : Tensor.from(dtype, shape, init.data);
  if (isInitSpec(init)) return materializeInit(init as InitSpec, dtype, shape);
  throw new Error('parameter without an initializer');
}

export const constant = defineOp({
  name: 'constant',
  family: 'source',
  doc: 'A constant tensor.',
  operands: [],
  attrs: { value: { type: 'tensor' } },
  infer: (_t, attrs) => {
    const v = attrs['value'] as Tensor;
    return [{ dtype: v.dtype, shape: [...v.shape] }];
  },
  kernel: (_in, attrs) => [attrs['value'] as Tensor],
  grad: 'none',
});

export const SOURCE_OPS = [input, parameter, constant];
