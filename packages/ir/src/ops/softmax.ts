import { dtypeShortName, isFloat } from '../dtype.js';
import { fromValues } from '../kernels/elementwise.js';
import { softmaxValues } from '../kernels/softmax.js';
import type { GraphBuilder } from '../builder.js';
import type { Value } from '../graph.js';
import { OpDef, defineOp } from '../opdef.js';
import { ShapeError, normalizeAxis } from '../shape.js';

/** Softmax and log-softmax along one axis. */

/** Backward of y = softmax(x) along `axis`: dx = y·(g - Σ g·y). */
export function softmaxBackward(b: GraphBuilder, g: Value, y: Value, axis: number): Value {
  const s = b.op('reduce_sum', [b.op('mul', [g, y])], { axes: [axis], keepdims: true });
  return b.op('mul', [y, b.op('sub', [g, s])]);
}

/** Backward of y = log_softmax(x) along `axis`: dx = g - exp(y)·Σ g. */
export function logSoftmaxBackward(b: GraphBuilder, g: Value, y: Value, axis: number): Value {
  const s = b.op('reduce_sum', [g], { axes: [axis], keepdims: true });
  return b.op('sub', [g, b.op('mul', [b.op('exp', [y]), s])]);
}

function makeSoftmax(name: string, log: boolean, doc: string): OpDef {
  return defineOp({
    name,
    family: 'softmax',
    doc,
    operands: [{ name: 'x' }],
    attrs: { axis: { type: 'int', default: -1 } },
    infer: ([x], attrs) => {
      if (!isFloat(x!.dtype)) throw new ShapeError(`input must be float, got ${dtypeShortName(x!.dtype)}`);
      normalizeAxis(attrs['axis'] as number, Math.max(x!.shape.length, 1));
      return [{ dtype: x!.dtype, shape: [...x!.shape] }];
    },
    kernel: ([x], attrs) => {
      const axis = normalizeAxis(attrs['axis'] as number, Math.max(x!.shape.length, 1));
      const y = softmaxValues(x!.data, x!.shape, axis, log);
      return [fromValues(x!.dtype, x!.shape, y)];
    },
    grad: ({ b, op, inputs, outputs, outputGrads }) => {
      const g = outputGrads[0];
      if (!g) return [undefined];
      const axis = normalizeAxis(op.attrs['axis'] as number, Math.max(inputs[0]!.type.shape.length, 1));
      return [(log ? logSoftmaxBackward : softmaxBackward)(b, g, outputs[0]!, axis)];
    },
    saves: { results: [0] },
  });
}

export const softmax = makeSoftmax('softmax', false, 'exp(x - max) / sum(exp(x - max)) along axis');
export const log_softmax = makeSoftmax('log_softmax', true, 'x - max - log(sum(exp(x - max))) along axis');

export const SOFTMAX_OPS: OpDef[] = [softmax, log_softmax];
