import { DType } from './dtype.js';
import { InitSpec } from './attributes.js';
import { Rng } from './random.js';
import { Shape, ShapeError, numElements } from './shape.js';
import { Tensor, allocData } from './tensor.js';

/** torch.nn.init's fan computation: dim 1 is fan-in, dim 0 fan-out, times the receptive field. */
export function fans(shape: Shape): { fanIn: number; fanOut: number } {
  if (shape.length < 2) {
    const n = shape.length === 1 ? shape[0]! : 1;
    return { fanIn: n, fanOut: n };
  }
  let receptive = 1;
  for (let i = 2; i < shape.length; i++) receptive *= shape[i]!;
  return { fanIn: shape[1]! * receptive, fanOut: shape[0]! * receptive };
}

/** Materialises an initializer into a tensor. The same spec always gives the same values. */
export function materializeInit(spec: InitSpec, dtype: DType, shape: Shape): Tensor {
  // zeros need no draw and no conversion (an optimizer's state for a large model is mostly zeros)
  if (spec.fn === 'zeros') return Tensor.zeros(dtype, shape);
  const n = numElements(shape);
  const a = spec.args;
  const seed = a['seed'] ?? 0;
  const rng = new Rng(seed);
  // float32 and float64 tensors are drawn into their own storage: a typed array's store rounds as
  // Tensor.from would, and a model's weights are not held twice (BERT's would take 680 MB)
  const direct = dtype === 'float32' || dtype === 'float64';
  const values = direct ? allocData(dtype, n) : new Float64Array(n);
  const { fanIn, fanOut } = fans(shape);
  switch (spec.fn) {
    case 'zeros':
      break;
    case 'ones':
      values.fill(1);
      break;
    case 'constant':
      values.fill(a['value'] ?? 0);
      break;
    case 'normal': {
      const mean = a['mean'] ?? 0;
      const std = a['std'] ?? 1;
      for (let i = 0; i < n; i++) values[i] = mean + std * rng.normal();
      break;
    }
    case 'uniform': {
      const lo = a['low'] ?? 0;
      const hi = a['high'] ?? 1;
      for (let i = 0; i < n; i++) values[i] = lo + (hi - lo) * rng.uniform();
      break;
    }
    case 'xavier_uniform': {
      const bound = (a['gain'] ?? 1) * Math.sqrt(6 / (fanIn + fanOut));
      for (let i = 0; i < n; i++) values[i] = (2 * rng.uniform() - 1) * bound;
      break;
    }
    case 'xavier_normal': {
      const std = (a['gain'] ?? 1) * Math.sqrt(2 / (fanIn + fanOut));
      for (let i = 0; i < n; i++) values[i] = std * rng.normal();
      break;
    }
    case 'kaiming_uniform':
    case 'kaiming_normal': {
      const slope = a['a'] ?? 0;
      const fan = a['fan_out'] ? fanOut : fanIn;
      const std = Math.sqrt(2 / (1 + slope * slope)) / Math.sqrt(Math.max(fan, 1));
      if (spec.fn === 'kaiming_normal') for (let i = 0; i < n; i++) values[i] = std * rng.normal();
      else for (let i = 0; i < n; i++) values[i] = (2 * rng.uniform() - 1) * Math.sqrt(3) * std;
      break;
    }
    default:
      throw new ShapeError(`unknown initializer '${spec.fn}'`);
  }
  return direct ? new Tensor(dtype, shape, values) : Tensor.from(dtype, shape, values);
}
