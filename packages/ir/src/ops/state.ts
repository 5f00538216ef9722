import { DType } from '../dtype.js';
import { defineOp } from '../opdef.js';
import { ShapeError } from '../shape.js';
import { initialParameterValue } from './source.js';

/**
 * Persistent state besides the weights (optimizer state, gradient accumulators, step counters,
 * variable hyperparameters) and the op that writes state. Reads within one execution of a graph
 * see the values from before it; `assign` writes take effect when the graph finishes.
 */

export const VARIABLE_ROLES = ['optimizer_state', 'accumulator', 'counter', 'hyperparameter', 'buffer', 'pipeline'] as const;
export type VariableRole = (typeof VARIABLE_ROLES)[number];

export const variable = defineOp({
  name: 'variable',
  family: 'state',
  doc: 'non-trained persistent state, read by name (optimizer state, accumulators, counters, hyperparameters)',
  operands: [],
  attrs: {
    name: { type: 'string' },
    dtype: { type: 'dtype' },
    shape: { type: 'ints' },
    init: { type: 'initializer' },
    role: { type: 'string', values: VARIABLE_ROLES },
  },
  typeFromAttrs: true,
  infer: (_t, attrs) => {
    const shape = attrs['shape'] as number[];
    if (shape.some((d) => d < 0)) throw new ShapeError(`shape [${shape.join(',')}] has a negative dimension`);
    return [{ dtype: attrs['dtype'] as DType, shape }];
  },
  kernel: (_in, attrs) => [initialParameterValue(attrs)],
  grad: 'none',
});

export const assign = defineOp({
  name: 'assign',
  family: 'state',
  doc: 'writes a parameter or variable (by name) when the graph finishes executing',
  operands: [{ name: 'value', differentiable: false }],
  attrs: { name: { type: 'string' } },
  sideEffects: true,
  infer: () => [],
  kernel: () => [],
  grad: 'none',
});

export const STATE_OPS = [variable, assign];
