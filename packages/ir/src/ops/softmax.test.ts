import { AttrInput } from '../builder.js';
import { DiagnosticError, GraphBuilder, Tensor, roundToHalf } from '../index.js';
import { f32, runOp, runOp1 } from '../testing/kernels.js';

const softmax = (x: Tensor, attrs: AttrInput = {}) => runOp1('softmax', [x], attrs);
const logSoftmax = (x: Tensor, attrs: AttrInput = {}) => runOp1('log_softmax', [x], attrs);

function expectClose(actual: number[], expected: number[], digits = 6): void {
  expect(actual.length).toBe(expected.length);
  actual.forEach((v, i) => expect(v).toBeCloseTo(expected[i]!, digits));
}

describe('softmax', () => {
  it('computes hand-checked values', () => {
    // equal inputs share equally
    expect(softmax(f32([4], [7, 7, 7, 7])).toArray()).toEqual([0.25, 0.25, 0.25, 0.25]);
    // [0, ln 3]: exp gives 1 and 3, so 1/4 and 3/4
    expectClose(softmax(f32([2], [0, Math.log(3)])).toArray(), [0.25, 0.75]);
    // -inf gets nothing
    expect(softmax(f32([2], [-Infinity, 0])).toArray()).toEqual([0, 1]);
  });

  it('makes each line sum to 1 along the chosen axis', () => {
    const vals = Array.from({ length: 24 }, (_, i) => Math.sin(i * 1.3) * 4);
    const x = f32([2, 3, 4], vals);
    const sumsAlong = (t: Tensor, axis: number) => {
      const [A, B, C] = t.shape as [number, number, number];
      const sums: number[] = [];
      const at = (a: number, b: number, c: number) => t.data[(a * B + b) * C + c]!;
      if (axis === 2) for (let a = 0; a < A; a++) for (let b = 0; b < B; b++) sums.push(at(a, b, 0) + at(a, b, 1) + at(a, b, 2) + at(a, b, 3));
      if (axis === 1) for (let a = 0; a < A; a++) for (let c = 0; c < C; c++) sums.push(at(a, 0, c) + at(a, 1, c) + at(a, 2, c));
      if (axis === 0) for (let b = 0; b < B; b++) for (let c = 0; c < C; c++) sums.push(at(0, b, c) + at(1, b, c));
      return sums;
    };
    for (const [axis, normalised] of [[-1, 2], [2, 2], [1, 1], [0, 0], [-3, 0]] as const) {
      const y = softmax(x, { axis });
      expectClose(sumsAlong(y, normalised), new Array(sumsAlong(y, normalised).length).fill(1));
      expect(y.toArray().every((v) => v > 0 && v < 1)).toBe(true);
    }
  });

  it('is stable for large inputs', () => {
    // exp(1000) overflows a float64; subtracting the max makes it exp(0)
    expect(softmax(f32([2], [1000, 1000])).toArray()).toEqual([0.5, 0.5]);
    expect(softmax(f32([2], [1e30, 0])).toArray()).toEqual([1, 0]);
    expect(softmax(f32([2], [-1000, -1000])).toArray()).toEqual([0.5, 0.5]);
    // shift invariance: [0, 0, 1] + 1e4 gives e^0, e^0, e^1 over 2 + e
    const big = softmax(f32([3], [10000, 10000, 10001])).toArray();
    const e = Math.E;
    expectClose(big, [1 / (2 + e), 1 / (2 + e), e / (2 + e)]);
  });

  it('rounds to float16 once', () => {
    // 1/3 rounds to 0.333251953125 in float16 (1365 * 2^-12)
    const y = runOp('softmax', [Tensor.from('float16', [3], [0, 0, 0])])[0]!;
    expect(y.dtype).toBe('float16');
    expect(y.toArray()).toEqual([0.333251953125, 0.333251953125, 0.333251953125]);
    expect(roundToHalf(1 / 3)).toBe(0.333251953125);
  });
});

describe('log_softmax', () => {
  it('computes hand-checked values', () => {
    // two equal entries: log(1/2) each
    expectClose(logSoftmax(f32([2], [3, 3])).toArray(), [-Math.LN2, -Math.LN2]);
    // [1,2,3]: x - log(e + e^2 + e^3) = x - 3 - log(1 + e^-1 + e^-2)
    const lse = 3 + Math.log(1 + Math.exp(-1) + Math.exp(-2));
    expectClose(logSoftmax(f32([3], [1, 2, 3])).toArray(), [1 - lse, 2 - lse, 3 - lse]);
  });

  it('is stable where log(softmax) is not', () => {
    // log(softmax) of [0, 1000] would be log(0) = -inf for the first entry; log_softmax gives -1000
    expect(logSoftmax(f32([2], [0, 1000])).toArray()).toEqual([-1000, 0]);
    expectClose(logSoftmax(f32([2], [1e4, 1e4])).toArray(), [-Math.LN2, -Math.LN2]);
  });

  it('agrees with log of softmax in the ordinary range, along any axis', () => {
    const x = f32([3, 4], Array.from({ length: 12 }, (_, i) => Math.cos(i) * 3));
    for (const axis of [0, 1]) {
      const a = logSoftmax(x, { axis }).toArray();
      const b = softmax(x, { axis }).toArray().map(Math.log);
      expectClose(a, b, 5);
    }
  });
});

describe('softmax shape inference', () => {
  it('matches the kernel, including scalars and float16', () => {
    for (const op of ['softmax', 'log_softmax']) {
      expect(runOp(op, [f32([2, 5, 3], new Array(30).fill(1))], { axis: 1 })[0]!.shape).toEqual([2, 5, 3]);
      expect(runOp(op, [Tensor.scalar('float16', 2)])[0]!.shape).toEqual([]);
    }
    // a scalar is a line of one: softmax 1, log_softmax 0
    expect(softmax(Tensor.scalar('float32', 5)).toArray()).toEqual([1]);
    expect(logSoftmax(Tensor.scalar('float32', 5)).toArray()).toEqual([0]);
  });
});

describe('softmax errors', () => {
  it('rejects a bad axis and integer input', () => {
    const g = new GraphBuilder();
    const x = g.input('x', 'float32', [2, 3]);
    expect(() => g.op('softmax', [x], { axis: 2 })).toThrow(DiagnosticError);
    expect(() => g.op('softmax', [x], { axis: 2 })).toThrow('softmax: axis 2 is out of range for rank 2');
    expect(() => g.op('log_softmax', [g.input('i', 'int32', [3])])).toThrow('log_softmax: input must be float, got i32');
  });
});
