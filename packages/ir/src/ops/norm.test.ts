import { AttrInput } from '../builder.js';
import { DiagnosticError, GraphBuilder, Tensor, getOpDef, operandDifferentiable, roundToHalf } from '../index.js';
import { f32, runOp } from '../testing/kernels.js';


function expectClose(actual: number[], expected: number[], digits = 5): void {
  expect(actual.length).toBe(expected.length);
  actual.forEach((v, i) => expect(v).toBeCloseTo(expected[i]!, digits));
}

/** Values of channel c of an [N,C,...] tensor. */
function channel(t: Tensor, c: number): number[] {
  const C = t.shape[1]!;
  const S = t.size / (t.shape[0]! * C);
  const out: number[] = [];
  for (let n = 0; n < t.shape[0]!; n++) for (let i = 0; i < S; i++) out.push(t.data[(n * C + c) * S + i]!);
  return out;
}
const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
const variance = (v: number[]) => mean(v.map((x) => (x - mean(v)) ** 2));

describe('batch_norm', () => {
  it('normalises with the running statistics in inference', () => {
    // epsilon 0; channel 0: mean 2, var 1, scale 2, bias 0: (1-2)/1*2 = -2, (3-2)/1*2 = 2
    // channel 1: mean 10, var 25, scale 1, bias 1: (10-10)/5+1 = 1, (20-10)/5+1 = 3
    const ys = runOp(
      'batch_norm',
      [f32([1, 2, 1, 2], [1, 3, 10, 20]), f32([2], [2, 1]), f32([2], [0, 1]), f32([2], [2, 10]), f32([2], [1, 25])],
      { epsilon: 0 },
    );
    expect(ys).toHaveLength(1);
    expect(ys[0]!.toArray()).toEqual([-2, 2, 1, 3]);
    // epsilon is added to the variance: var 3 + eps 1 = 4 → (4-2)/2 = 1
    const z = runOp('batch_norm', [f32([1, 1], [4]), f32([1], [1]), f32([1], [0]), f32([1], [2]), f32([1], [3])], { epsilon: 1 })[0]!;
    expect(z.toArray()).toEqual([1]);
  });

  it('uses batch statistics in training and updates the running ones', () => {
    // x[N=2, C=2, L=2]; channel 0 holds {1,2} (n=0) and {3,6} (n=1): mean 3,
    // biased var (4+1+0+9)/4 = 3.5, unbiased 14/3; channel 1 holds {0,0,0,4}: mean 1, biased var (1+1+1+9)/4 = 3, unbiased 4
    const x = f32([2, 2, 2], [1, 2, 0, 0, 3, 6, 0, 4]);
    const [y, rm, rv] = runOp(
      'batch_norm',
      [x, f32([2], [1, 1]), f32([2], [0, 0]), f32([2], [0, 10]), f32([2], [1, 2])],
      { epsilon: 0, momentum: 0.9, training: true },
    );
    const s0 = Math.sqrt(3.5);
    const s1 = Math.sqrt(3);
    expectClose(y!.toArray(), [(1 - 3) / s0, (2 - 3) / s0, -1 / s1, -1 / s1, (3 - 3) / s0, (6 - 3) / s0, -1 / s1, 3 / s1]);
    // running = old*0.9 + batch*0.1: mean 0*0.9 + 3*0.1 = 0.3, 10*0.9 + 1*0.1 = 9.1
    expectClose(rm!.toArray(), [0.3, 9.1]);
    // var 1*0.9 + (14/3)*0.1 = 0.9 + 1.4/3, 2*0.9 + 4*0.1 = 2.2
    expectClose(rv!.toArray(), [0.9 + 1.4 / 3, 2.2]);
  });

  it('gives zero mean and unit variance per channel in training', () => {
    // a [4,3,2,2] input with a different offset and spread per channel
    const vals = Array.from({ length: 48 }, (_, i) => Math.sin(i * 1.7) * (1 + (Math.floor(i / 4) % 3)) + 5 * (Math.floor(i / 4) % 3));
    const C = 3;
    const ones = f32([C], [1, 1, 1]);
    const zeros = f32([C], [0, 0, 0]);
    const [y] = runOp('batch_norm', [f32([4, 3, 2, 2], vals), ones, zeros, zeros, ones], { epsilon: 0, training: true });
    for (let c = 0; c < C; c++) {
      const v = channel(y!, c);
      expect(mean(v)).toBeCloseTo(0, 5);
      expect(variance(v)).toBeCloseTo(1, 5);
    }
    // with scale and bias: mean is the bias and the standard deviation |scale|
    const [z] = runOp('batch_norm', [f32([4, 3, 2, 2], vals), f32([C], [2, -3, 0.5]), f32([C], [1, 2, 3]), zeros, ones], { epsilon: 0, training: true });
    [2, -3, 0.5].forEach((s, c) => {
      const v = channel(z!, c);
      expect(mean(v)).toBeCloseTo([1, 2, 3][c]!, 5);
      expect(variance(v)).toBeCloseTo(s * s, 4);
    });
  });

  it('marks the running statistics as not differentiable', () => {
    const def = getOpDef('batch_norm')!;
    expect([0, 1, 2, 3, 4].map((i) => operandDifferentiable(def, i))).toEqual([true, true, true, false, false]);
    expect(typeof def.grad).toBe('function');
  });
});

describe('layer_norm', () => {
  it('normalises over the last dims and applies scale and bias', () => {
    // row [1,3] → mean 2, var 1 → [-1, 1]; scale [2,3], bias [1,1]: [-2+1, 3+1] = [-1, 4]
    const y = runOp('layer_norm', [f32([2, 2], [1, 3, 5, 5]), f32([2], [2, 3]), f32([2], [1, 1])], { epsilon: 0 })[0]!;
    expect(y.toArray().slice(0, 2)).toEqual([-1, 4]);
    // default epsilon 1e-5: [1,3] → ±1/sqrt(1 + 1e-5); the constant row [5,5] stays finite: [0, 0]
    const z = runOp('layer_norm', [f32([2, 2], [1, 3, 5, 5])])[0]!;
    expectClose(z.toArray(), [-1 / Math.sqrt(1 + 1e-5), 1 / Math.sqrt(1 + 1e-5), 0, 0], 6);
  });

  it('normalises from an earlier axis with a broadcast scale', () => {
    // x[1,2,2] = [[0,2],[4,6]], axis 1 normalises all four: mean 3, var (9+1+1+9)/4 = 5
    // scale [2,1] broadcasts over the last dim: rows scaled by 10 and 1
    const x = f32([1, 2, 2], [0, 2, 4, 6]);
    const y = runOp('layer_norm', [x, f32([2, 1], [10, 1])], { axis: 1, epsilon: 0 })[0]!;
    const s = Math.sqrt(5);
    expectClose(y.toArray(), [(-3 / s) * 10, (-1 / s) * 10, 1 / s, 3 / s]);
    // axis -1 instead normalises each row alone: [0,2] → [-1,1], [4,6] → [-1,1]
    expect(runOp('layer_norm', [x], { axis: -1, epsilon: 0 })[0]!.toArray()).toEqual([-1, 1, -1, 1]);
  });

  it('rounds to float16 once, at the end', () => {
    // [0,1,2]: mean 1, var 2/3, so y = ±1/sqrt(2/3) = ±sqrt(1.5)
    const y = runOp('layer_norm', [Tensor.from('float16', [3], [0, 1, 2])], { epsilon: 0 })[0]!;
    expect(y.dtype).toBe('float16');
    expect(y.toArray()).toEqual([-roundToHalf(Math.sqrt(1.5)), 0, roundToHalf(Math.sqrt(1.5))]);
  });
});

describe('group_norm', () => {
  it('normalises each group of channels', () => {
    // x[1,4,1] = [1,3,10,30], 2 groups: {1,3} mean 2 var 1 → [-1,1]; {10,30} mean 20 var 100 → [-1,1]
    // per-channel scale [1,2,3,4] and bias [0,0,0,1]: [-1, 2, -3, 5]
    const y = runOp('group_norm', [f32([1, 4, 1], [1, 3, 10, 30]), f32([4], [1, 2, 3, 4]), f32([4], [0, 0, 0, 1])], { num_groups: 2, epsilon: 0 })[0]!;
    expect(y.toArray()).toEqual([-1, 2, -3, 5]);
  });

  it('equals layer norm over [C,...] with one group and normalises each channel with C groups', () => {
    const vals = Array.from({ length: 24 }, (_, i) => Math.cos(i * 0.9) * (i % 5));
    const x = f32([2, 3, 4], vals);
    const ones = f32([3], [1, 1, 1]);
    const zeros = f32([3], [0, 0, 0]);
    const one = runOp('group_norm', [x, ones, zeros], { num_groups: 1 })[0]!;
    const ln = runOp('layer_norm', [x], { axis: 1 })[0]!;
    expectClose(one.toArray(), ln.toArray(), 5);
    const each = runOp('group_norm', [x, ones, zeros], { num_groups: 3, epsilon: 0 })[0]!;
    for (let n = 0; n < 2; n++) {
      for (let c = 0; c < 3; c++) {
        const v = each.toArray().slice((n * 3 + c) * 4, (n * 3 + c + 1) * 4);
        expect(mean(v)).toBeCloseTo(0, 5);
        expect(variance(v)).toBeCloseTo(1, 4);
      }
    }
  });
});

describe('norm shape inference', () => {
  it('matches the kernel for each op and mode', () => {
    // runOp() compares inferred and produced dtypes and shapes
    const v = (dtype: 'float32' | 'float16', shape: number[]) => Tensor.zeros(dtype, shape);
    const x = Tensor.from('float16', [2, 3, 5], Array.from({ length: 30 }, (_, i) => i % 7));
    for (const training of [false, true]) {
      const out = runOp('batch_norm', [x, v('float16', [3]), v('float16', [3]), v('float16', [3]), Tensor.full('float16', [3], 1)], { training });
      expect(out.map((t) => t.shape)).toEqual(training ? [[2, 3, 5], [3], [3]] : [[2, 3, 5]]);
    }
    expect(runOp('layer_norm', [x, v('float16', [1, 5])], { axis: -2 })[0]!.shape).toEqual([2, 3, 5]);
    expect(runOp('group_norm', [x, v('float16', [3]), v('float16', [3])], { num_groups: 3 })[0]!.shape).toEqual([2, 3, 5]);
  });
});

describe('norm errors', () => {
  function build(op: string, shapes: number[][], attrs: AttrInput = {}) {
    const g = new GraphBuilder();
    const vs = shapes.map((s, i) => g.input(`v${i}`, 'float32', s));
    return () => g.ops(op, vs, attrs);
  }
  it('names mismatched shapes', () => {
    expect(build('group_norm', [[2, 6, 4], [6], [6]], { num_groups: 4 })).toThrow(DiagnosticError);
    expect(build('group_norm', [[2, 6, 4], [6], [6]], { num_groups: 4 })).toThrow('group_norm: num_groups 4 does not divide the 6 channels of [2,6,4]');
    expect(build('batch_norm', [[2, 3, 4], [3], [3], [4], [3]])).toThrow('batch_norm: mean [4] must have shape [3] (the channels, dim 1, of [2,3,4])');
    expect(build('layer_norm', [[2, 3, 4], [3]])).toThrow('layer_norm: scale [3] does not broadcast to the normalised dims [4] of [2,3,4] (axis -1)');
    expect(build('layer_norm', [[2, 3], [3]], { axis: 2 })).toThrow('layer_norm: axis 2 is out of range for rank 2');
  });
  it('rejects training on a single value per channel and a negative epsilon', () => {
    expect(build('batch_norm', [[1, 3], [3], [3], [3], [3]], { training: true })).toThrow(
      'batch_norm: training needs more than one value per channel, input [1,3] has 1',
    );
    expect(build('batch_norm', [[2, 3], [3], [3], [3], [3]], { epsilon: -1 })).toThrow('batch_norm: epsilon must be non-negative, got -1');
  });
});
