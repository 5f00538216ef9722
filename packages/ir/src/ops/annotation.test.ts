import fc from 'fast-check';
import { DType } from '../dtype.js';
import { AttrInput } from '../builder.js';
import { getOpDef } from '../registry.js';
import { numElements } from '../shape.js';
import { Tensor, tensorsIdentical } from '../tensor.js';
import { KERNEL_CTX, buildError as buildErrorOn, runOp1 } from '../testing/kernels.js';

/** Runs an op on x and returns its first result with the lines it printed. */
function run(name: string, x: Tensor, attrs: AttrInput = {}): { y: Tensor; printed: string[] } {
  const printed: string[] = [];
  const y = runOp1(name, x, attrs, { ...KERNEL_CTX, print: (l) => printed.push(l) });
  return { y, printed };
}

const buildError = (kind: string, dtype: DType, shape: number[], attrs: AttrInput = {}) => buildErrorOn(kind, [{ dtype, shape }], attrs);

const PASS_THROUGH = ['identity', 'nop', 'recomputation_checkpoint', 'set_available_memory', 'ipu_print_tensor'];
const ATTRS: Record<string, AttrInput> = { set_available_memory: { proportion: 0.3 } };

describe('pass-through annotations', () => {
  it('return x unchanged for every dtype', () => {
    const xs = [
      Tensor.from('float32', [2, 2], [1, -0, NaN, Infinity]),
      Tensor.from('float16', [1], [0.5]),
      Tensor.from('int32', [3], [-1, 0, 2 ** 31 - 1]),
      Tensor.from('uint32', [1], [2 ** 32 - 1]),
      Tensor.from('bool', [2], [1, 0]),
    ];
    for (const name of PASS_THROUGH) {
      for (const x of xs) expect(tensorsIdentical(run(name, x, ATTRS[name]).y, x)).toBe(true);
    }
  });

  it('prints the tensor with its title', () => {
    const m = Tensor.from('float32', [2, 2], [1, 2.5, -3, 4]);
    expect(run('ipu_print_tensor', m, { title: 'act' }).printed).toEqual(['act: [[1, 2.5], [-3, 4]]']);
    expect(run('ipu_print_tensor', Tensor.scalar('int32', 7)).printed).toEqual(['7']);
    // stored float32 0.1 is 0.100000001490116...; the shortest decimal reading back to it is 0.1
    expect(run('ipu_print_tensor', Tensor.from('float32', [3], [0.1, -0, NaN]), { title: 'f' }).printed).toEqual(['f: [0.1, 0, NaN]']);
    // half 0.1 is 0.0999755859375 and 0.1 rounds back to it; 65500 rounds to 65504 in half (numpy prints it so too)
    expect(run('ipu_print_tensor', Tensor.from('float16', [2], [0.1, 65504])).printed).toEqual(['[0.1, 65500]']);
    expect(run('ipu_print_tensor', Tensor.zeros('float32', [2, 0]), { title: 'e' }).printed).toEqual(['e: [[], []]']);
  });

  it('checks the available-memory proportion', () => {
    expect(run('set_available_memory', Tensor.zeros('float32', [1]), { proportion: 1 }).y.shape).toEqual([1]);
    expect(buildError('set_available_memory', 'float32', [2], { proportion: 0 })).toBe('set_available_memory: proportion 0 is not in (0, 1]');
    expect(buildError('set_available_memory', 'float32', [2], { proportion: 1.5 })).toBe('set_available_memory: proportion 1.5 is not in (0, 1]');
    expect(buildError('set_available_memory', 'float32', [2])).toBe("set_available_memory: missing required attribute 'proportion'");
    expect(buildError('identity', 'float32', [2], { title: 'x' })).toBe("identity: unknown attribute 'title' (it takes none)");
  });

  it('keeps printing and losses alive, and differentiates through all of them', () => {
    expect(getOpDef('ipu_print_tensor')!.sideEffects).toBe(true);
    expect(getOpDef('identity_loss')!.sideEffects).toBe(true);
    expect(getOpDef('identity')!.sideEffects).toBeFalsy();
    for (const name of [...PASS_THROUGH, 'identity_loss']) expect(typeof getOpDef(name)!.grad).toBe('function');
  });
});

describe('identity_loss', () => {
  const x = Tensor.from('float32', [2, 2], [1, 2, 3, 4]);
  it('reduces to a scalar mean or sum, or passes x through', () => {
    const mean = run('identity_loss', x).y;
    expect(mean.shape).toEqual([]);
    expect(mean.toArray()).toEqual([2.5]); // (1+2+3+4)/4
    expect(run('identity_loss', x, { reduction: 'sum' }).y.toArray()).toEqual([10]);
    const none = run('identity_loss', x, { reduction: 'none' }).y;
    expect(tensorsIdentical(none, x)).toBe(true);
    // float16: (1 + 2^-11) / 1 ties to even → 1
    expect(run('identity_loss', Tensor.from('float16', [2], [1, 2 ** -11]), { reduction: 'sum' }).y.toArray()).toEqual([1]);
  });
  it('needs a float operand and a known reduction', () => {
    expect(buildError('identity_loss', 'int32', [2])).toMatch(/^identity_loss: operand type i32 is not a float type/);
    expect(buildError('identity_loss', 'float32', [2], { reduction: 'max' })).toMatch(/^identity_loss: attribute 'reduction' must be one of "mean", "sum", "none"/);
  });
});

describe('annotation properties', () => {
  it('infer the shapes the kernels produce', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 4 }), { maxLength: 4 }),
        fc.constantFrom('identity', 'nop', 'recomputation_checkpoint', 'set_available_memory', 'ipu_print_tensor', 'identity_loss'),
        fc.constantFrom('mean', 'sum', 'none'),
        (shape, op, reduction) => {
          const x = Tensor.from('float32', shape, Array.from({ length: numElements(shape) }, (_, i) => i));
          const attrs = op === 'identity_loss' ? { reduction } : ATTRS[op] ?? {};
          run(op, x, attrs);
        },
      ),
    );
  });
});
