import { dtypeShortName, isFloat } from '../dtype.js';
import { fromValues } from '../kernels/elementwise.js';
import { softmaxValues } from '../kernels/softmax.js';
import { OpDef, defineOp } from '../opdef.js';
import { ShapeError, normalizeAxis } from '../shape.js';

/** Softmax and log-softmax along one axis. */

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
  });
}

export const softmax = makeSoftmax('softmax', false, 'exp(x - max) / sum(exp(x - max)) along axis');
export const log_softmax = makeSoftmax('log_softmax', true, 'x - max - log(sum(exp(x - max))) along axis');

export const SOFTMAX_OPS: OpDef[] = [softmax, log_softmax];
