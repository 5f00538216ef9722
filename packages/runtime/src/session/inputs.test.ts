import fc from 'fast-check';
import { DiagnosticError, Tensor, TensorType, roundToHalf } from '@tilegraph/ir';
import { inputTensor, runInputTensors } from './inputs.js';

/** The conversion of run inputs (typed arrays, number arrays, Tensors) and its diagnostics. */

const f16: TensorType = { dtype: 'float16', shape: [2] };
const bool: TensorType = { dtype: 'bool', shape: [3] };

function message(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(DiagnosticError);
    return (e as Error).message;
  }
  throw new Error('expected a diagnostic');
}

describe('inputTensor', () => {
  test('float16 takes IEEE half bits in a Uint16Array, or numbers rounded to half', () => {
    expect(inputTensor('h', new Uint16Array([0x3c00, 0xc000, 0x3800, 0x7c00]), f16, 2).toArray()).toEqual([1, -2, 0.5, Infinity]);
    expect(inputTensor('h', [0.1, 1, 2, 3], f16, 2).data[0]).toBe(roundToHalf(0.1));
    expect(message(() => inputTensor('h', new Float32Array(4), f16, 2))).toMatch(/input 'h': expected float16\[4\] \(2 micro-batches of float16\[2\]\) but got a Float32Array of 4 elements[^]*a float16 input takes a Uint16Array of IEEE half bits/);
  });

  test('bool takes 0 and 1 in a Uint8Array (a Buffer too), or booleans, and nothing else', () => {
    expect(inputTensor('m', new Uint8Array([1, 0, 1]), bool, 1).toArray()).toEqual([1, 0, 1]);
    expect(inputTensor('m', Buffer.from([0, 1, 1]), bool, 1).toArray()).toEqual([0, 1, 1]);
    expect(inputTensor('m', [true, false, 1], bool, 1).toArray()).toEqual([1, 0, 1]);
    expect(message(() => inputTensor('m', new Uint8Array([1, 2, 0]), bool, 1))).toMatch(/input 'm': .* but got 2 at position 1 of a Uint8Array[^]*bool elements are 0 or 1/);
    expect(message(() => inputTensor('m', [true, 'yes', false], bool, 1))).toMatch(/but got "yes" at position 1/);
  });

  test('integers must be integers of the dtype\'s range', () => {
    const i32: TensorType = { dtype: 'int32', shape: [] };
    const u32: TensorType = { dtype: 'uint32', shape: [] };
    // scalar micro-batches stack into [n]
    expect(inputTensor('k', [1, -2, 3], i32, 3).shape).toEqual([3]);
    expect(message(() => inputTensor('k', [1, 2 ** 31, 3], i32, 3))).toMatch(/2147483648 at position 1[^]*int32 elements are integers from -2147483648 to 2147483647/);
    expect(message(() => inputTensor('k', [1, -1, 3], u32, 3))).toMatch(/-1 at position 1[^]*uint32 elements are integers from 0/);
    expect(message(() => inputTensor('k', new Int32Array(3), u32, 3))).toMatch(/but got an Int32Array[^]*a uint32 input takes a Uint32Array/);
  });

  test('narrow integers and low-precision floats take the arrays the host holds them in, checked or rounded', () => {
    const i8: TensorType = { dtype: 'int8', shape: [2] };
    const f8: TensorType = { dtype: 'float8e4m3fn', shape: [2] };
    expect(inputTensor('q', new Int32Array([-128, 127]), i8, 1).toArray()).toEqual([-128, 127]);
    expect(message(() => inputTensor('q', new Int32Array([1, 128]), i8, 1))).toMatch(/128 at position 1[^]*int8 elements are integers from -128 to 127/);
    expect(message(() => inputTensor('q', [-129, 0], i8, 1))).toMatch(/-129 at position 0/);
    // 0.3 rounds to 0.3125 (steps of 2^-5 in [0.25, 0.5)); 1000 is beyond 448, NaN in e4m3fn
    expect(inputTensor('h', new Float32Array([0.3, 1000]), f8, 1).toArray()).toEqual([0.3125, NaN]);
  });

  test('a typed array is copied: changing it afterwards does not change the run', () => {
    const src = new Float32Array([1, 2, 3, 4]);
    const t = inputTensor('x', src, { dtype: 'float32', shape: [2, 2] }, 1);
    src[0] = 99;
    expect(t.toArray()).toEqual([1, 2, 3, 4]);
  });

  test('nested arrays must have the run shape', () => {
    const type: TensorType = { dtype: 'float32', shape: [1, 2] };
    expect(inputTensor('x', [[1, 2], [3, 4]], type, 2).toArray()).toEqual([1, 2, 3, 4]);
    expect(message(() => inputTensor('x', [[1, 2], [3]], type, 2))).toMatch(/a nested array whose x\[1\] has 1 elements, not 2/);
    expect(message(() => inputTensor('x', [[1, [2]], [3, 4]], type, 2))).toMatch(/a nested array deeper than \[2,2\] \(at x\[0\]\[1\]\)/);
    expect(message(() => inputTensor('x', [[1, 2], 3], type, 2))).toMatch(/a nested array whose x\[1\] is a number, not an array of 2/);
  });
});

describe('runInputTensors', () => {
  const types = [{ name: 'constructor', type: { dtype: 'float32', shape: [2] } as TensorType }];

  test('an input named like a property of every object is still missing when not given', () => {
    expect(message(() => runInputTensors({}, types, 1))).toMatch(/input 'constructor' \(1 micro-batches of float32\[2\]\) was not given: a run takes float32\[2\]/);
    expect(runInputTensors({ constructor: [1, 2] }, types, 1)['constructor']!.toArray()).toEqual([1, 2]);
  });

  test('whatever is given, the outcome is tensors or a diagnostic, never another error', () => {
    const model = [
      { name: 'x', type: { dtype: 'float32', shape: [2, 3] } as TensorType },
      { name: 'y', type: { dtype: 'int32', shape: [2] } as TensorType },
    ];
    const anything = fc.anything({ withBigInt: true, withNullPrototype: true, withTypedArray: true, withSparseArray: true, withBoxedValues: true });
    // elements that are mostly numbers, in arrays of about the lengths the inputs take, so that the element checks are reached
    const element = fc.oneof({ weight: 5, arbitrary: fc.oneof(fc.double(), fc.integer()) }, { weight: 1, arbitrary: anything });
    const sized = (n: number) => fc.array(element, { minLength: n - 1, maxLength: n + 1 });
    const value = fc.oneof(
      anything,
      sized(4),
      sized(12),
      fc.array(sized(3), { minLength: 3, maxLength: 5 }),
      fc.float32Array(),
      fc.int32Array(),
      fc.constantFrom(new Tensor('float32', [4, 3], new Float32Array(12)), new Tensor('int32', [4], new Int32Array(4)), new Float32Array(12), new Int32Array(4)),
    );
    fc.assert(
      fc.property(fc.oneof(anything, fc.record({ x: value, y: value }, { requiredKeys: [] }), fc.dictionary(fc.string(), value)), (inputs) => {
        try {
          const out = runInputTensors(inputs, model, 2);
          expect(out['x']!.shape).toEqual([4, 3]);
          expect(out['y']!.shape).toEqual([4]);
        } catch (e) {
          if (!(e instanceof DiagnosticError)) throw e;
          expect(e.message).toMatch(/^error: (input '(x|y)'|the inputs must be|the model has no input named)/);
        }
      }),
      { numRuns: 2000 },
    );
  });
});
