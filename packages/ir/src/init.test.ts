import fc from 'fast-check';
import { InitSpec } from './attributes.js';
import { fans, materializeInit } from './init.js';
import { Rng } from './random.js';
import { Tensor } from './tensor.js';

/**
 * Initializers: float32 and float64 tensors are drawn straight into their storage. The values
 * must be those of the draws in double precision, rounded once by Tensor.from, as every other
 * type's are.
 */

/** The draws of `spec` in double precision, written out from torch.nn.init's formulas. */
function drawsInDouble(spec: InitSpec, shape: number[]): Float64Array {
  const n = shape.reduce((a, b) => a * b, 1);
  const rng = new Rng(spec.args['seed'] ?? 0);
  const out = new Float64Array(n);
  const { fanIn, fanOut } = fans(shape);
  for (let i = 0; i < n; i++) {
    if (spec.fn === 'normal') out[i] = 0.5 + 2 * rng.normal();
    else if (spec.fn === 'uniform') out[i] = -1 + 3 * rng.uniform();
    else if (spec.fn === 'xavier_uniform') out[i] = (2 * rng.uniform() - 1) * Math.sqrt(6 / (fanIn + fanOut));
    else out[i] = Math.sqrt(2) / Math.sqrt(Math.max(fanIn, 1)) * rng.normal();
  }
  return out;
}

const specs: InitSpec[] = [
  { fn: 'normal', args: { mean: 0.5, std: 2 } },
  { fn: 'uniform', args: { low: -1, high: 2 } },
  { fn: 'xavier_uniform', args: {} },
  { fn: 'kaiming_normal', args: {} },
];

test('float32 and float64 initial values are the double-precision draws rounded once, bit for bit', () => {
  fc.assert(
    fc.property(fc.constantFrom(...specs), fc.constantFrom('float32' as const, 'float64' as const), fc.array(fc.integer({ min: 1, max: 7 }), { minLength: 1, maxLength: 3 }), fc.integer({ min: 0, max: 1000 }), (spec, dtype, shape, seed) => {
      const seeded = { ...spec, args: { ...spec.args, seed } };
      const got = materializeInit(seeded, dtype, shape);
      const want = Tensor.from(dtype, shape, drawsInDouble(seeded, shape));
      expect(got.data.constructor).toBe(want.data.constructor);
      expect(Buffer.from(got.data.buffer).equals(Buffer.from(want.data.buffer))).toBe(true);
    }),
    { numRuns: 100 },
  );
});

test('other types still round through Tensor.from (float16 to half precision)', () => {
  const rng = new Rng(4);
  const z = Array.from({ length: 5 }, () => rng.normal());
  expect(Array.from(materializeInit({ fn: 'normal', args: { seed: 4 } }, 'float16', [5]).data)).toEqual(Array.from(Tensor.from('float16', [5], z).data));
});
