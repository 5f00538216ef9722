import { AttrInput } from '../builder.js';
import { DiagnosticError, GraphBuilder, Tensor, getOpDef, operandDifferentiable } from '../index.js';
import { f32, i32, runOp, runOp1 } from '../testing/kernels.js';

const nll = (inputs: Tensor[], attrs: AttrInput = {}) => runOp1('nll_loss', inputs, attrs);
const ce = (inputs: Tensor[], attrs: AttrInput = {}) => runOp1('cross_entropy', inputs, attrs);

function expectClose(actual: number[], expected: number[], digits = 5): void {
  expect(actual.length).toBe(expected.length);
  actual.forEach((v, i) => expect(v).toBeCloseTo(expected[i]!, digits));
}

// three samples, three classes; the loss of sample n at class c is -logp[n][c]
const logp = f32([3, 3], [-1, -2, -3, -4, -5, -6, -7, -8, -9]);
const targets = i32([3], [0, 2, 1]);
const weight = f32([3], [1, 2, 3]);

describe('nll_loss', () => {
  it('reduces by none, sum and mean', () => {
    // picked: -logp[0][0] = 1, -logp[1][2] = 6, -logp[2][1] = 8
    const none = nll([logp, targets], { reduction: 'none' });
    expect(none.shape).toEqual([3]);
    expect(none.toArray()).toEqual([1, 6, 8]);
    expect(nll([logp, targets], { reduction: 'sum' }).toArray()).toEqual([15]);
    // mean is the default: 15 / 3
    const mean = nll([logp, targets]);
    expect(mean.shape).toEqual([]);
    expect(mean.toArray()).toEqual([5]);
  });

  it('weights each sample by its class; mean divides by the total weight', () => {
    // weights of the targets: w[0]=1, w[2]=3, w[1]=2 → [1*1, 3*6, 2*8] = [1, 18, 16]
    expect(nll([logp, targets, weight], { reduction: 'none' }).toArray()).toEqual([1, 18, 16]);
    expect(nll([logp, targets, weight], { reduction: 'sum' }).toArray()).toEqual([35]);
    // 35 / (1 + 3 + 2)
    expectClose(nll([logp, targets, weight]).toArray(), [35 / 6]);
  });

  it('ignores targets equal to ignore_index, also in the mean divisor', () => {
    // ignoring class 2 drops sample 1: none [1, 0, 8], sum 9, mean 9 / 2
    const attrs = { ignore_index: 2 };
    expect(nll([logp, targets], { ...attrs, reduction: 'none' }).toArray()).toEqual([1, 0, 8]);
    expect(nll([logp, targets], { ...attrs, reduction: 'sum' }).toArray()).toEqual([9]);
    expect(nll([logp, targets], attrs).toArray()).toEqual([4.5]);
    // with weights: [1, 0, 16], mean 17 / (w[0] + w[1]) = 17 / 3
    expect(nll([logp, targets, weight], { ...attrs, reduction: 'none' }).toArray()).toEqual([1, 0, 16]);
    expectClose(nll([logp, targets, weight], attrs).toArray(), [17 / 3]);
    // an ignored target may lie outside [0, C) (torch's -100)
    expect(nll([logp, i32([3], [0, -100, 1])], { ignore_index: -100 }).toArray()).toEqual([4.5]);
    // everything ignored: mean is 0/0
    expect(nll([logp, i32([3], [2, 2, 2])], attrs).toArray()).toEqual([NaN]);
  });

  it('takes spatial dimensions and unbatched input', () => {
    // logp[N=1, C=2, d=2]: class 0 → [-1, -2] over d, class 1 → [-3, -4]; target [[1, 0]]
    // position 0 picks class 1: 3; position 1 picks class 0: 2
    const x = f32([1, 2, 2], [-1, -2, -3, -4]);
    const none = nll([x, i32([1, 2], [1, 0])], { reduction: 'none' });
    expect(none.shape).toEqual([1, 2]);
    expect(none.toArray()).toEqual([3, 2]);
    expect(nll([x, i32([1, 2], [1, 0])]).toArray()).toEqual([2.5]);
    // unbatched: logp [C] with a scalar target
    const u = nll([f32([3], [-1, -2, -3]), i32([], [1])], { reduction: 'none' });
    expect(u.shape).toEqual([]);
    expect(u.toArray()).toEqual([2]);
  });

  it('sums float16 losses in float64', () => {
    // losses 1, 2^-11, 2^-11 sum to 1 + 2^-10 (float16 accumulation would give 1)
    const h = 2 ** -11;
    const y = nll([Tensor.from('float16', [3, 1], [-1, -h, -h]), i32([3], [0, 0, 0])], { reduction: 'sum' });
    expect(y.dtype).toBe('float16');
    expect(y.toArray()).toEqual([1 + 2 ** -10]);
  });

  it('rejects a target outside the classes at run time', () => {
    expect(() => nll([logp, i32([3], [0, 3, 1])])).toThrow(DiagnosticError);
    expect(() => nll([logp, i32([3], [0, 3, 1])])).toThrow('nll_loss: target 3 at position 1 is out of range [0, 3)');
  });
});

describe('cross_entropy', () => {
  // logits [1,2,3]: log-sum-exp = 3 + log(1 + e^-1 + e^-2)
  const lse = 3 + Math.log(1 + Math.exp(-1) + Math.exp(-2));

  it('is nll of log_softmax', () => {
    // target 2: lse - 3; target 0: lse - 1
    expectClose(ce([f32([2, 3], [1, 2, 3, 1, 2, 3]), i32([2], [2, 0])], { reduction: 'none' }).toArray(), [lse - 3, lse - 1]);
    // uniform logits over 4 classes: ln 4 whatever the target
    expectClose(ce([f32([1, 4], [5, 5, 5, 5]), i32([1], [3])]).toArray(), [Math.log(4)]);
    // class dim 1 of [N, C, d]: logits [1, 2, 2], class 0 → [0, 0], class 1 → [ln 3, 0]
    // position 0: log-probs log(1/4), log(3/4); position 1: log(1/2) both; targets [1, 0]
    const s = ce([f32([1, 2, 2], [0, 0, Math.log(3), 0]), i32([1, 2], [1, 0])], { reduction: 'none' });
    expectClose(s.toArray(), [-Math.log(0.75), Math.LN2]);
  });

  it('matches nll_loss of log_softmax with weights and ignore_index', () => {
    const logits = f32([4, 3], [0.5, -1, 2, 3, 0, 0, -2, 1, 1, 0, 0, 4]);
    const t = i32([4], [2, 0, 1, 2]);
    const lp = runOp('log_softmax', [logits], { axis: 1 })[0]!;
    for (const reduction of ['none', 'sum', 'mean']) {
      for (const attrs of [{}, { ignore_index: 2 }]) {
        const a = ce([logits, t, weight], { reduction, ...attrs }).toArray();
        const b = nll([lp, t, weight], { reduction, ...attrs }).toArray();
        expectClose(a, b);
      }
    }
  });

  it('applies label smoothing as torch does', () => {
    // logits [1,2,3], target 2, ε = 0.3: nll = lse - 3; smoothing term Σ_c -logp[c] = 3·lse - 6
    // loss = 0.7·(lse - 3) + (0.3/3)·(3·lse - 6) = lse - 2.7
    expectClose(ce([f32([1, 3], [1, 2, 3]), i32([1], [2])], { label_smoothing: 0.3 }).toArray(), [lse - 2.7]);
    // ε = 1 is all smoothing: (3·lse - 6) / 3 = lse - 2
    expectClose(ce([f32([1, 3], [1, 2, 3]), i32([1], [2])], { label_smoothing: 1 }).toArray(), [lse - 2]);
  });

  it('applies label smoothing with weights, ignore_index and each reduction', () => {
    // zero logits over 3 classes: every log-prob is -ln 3. Targets [0, 2], weight [1,2,3], ε = 0.3.
    // nll_n = w[t]·ln3 = [1, 3]·ln3; smoothing_n = Σ_c w[c]·ln3 = 6·ln3
    // loss_n = 0.7·nll_n + 0.1·smoothing_n = [0.7 + 0.6, 2.1 + 0.6]·ln3 = [1.3, 2.7]·ln3
    const l3 = Math.log(3);
    const inputs = [f32([2, 3], [0, 0, 0, 0, 0, 0]), i32([2], [0, 2]), weight];
    const eps = { label_smoothing: 0.3 };
    expectClose(ce(inputs, { ...eps, reduction: 'none' }).toArray(), [1.3 * l3, 2.7 * l3]);
    expectClose(ce(inputs, { ...eps, reduction: 'sum' }).toArray(), [4 * l3]);
    // mean divides both parts by the target weights w[0] + w[2] = 4: 4·ln3 / 4
    expectClose(ce(inputs, { ...eps, reduction: 'mean' }).toArray(), [l3]);
    // ignoring class 0 removes sample 0 entirely (smoothing too): 2.7·ln3 / w[2]
    expectClose(ce(inputs, { ...eps, reduction: 'none', ignore_index: 0 }).toArray(), [0, 2.7 * l3]);
    expectClose(ce(inputs, { ...eps, ignore_index: 0 }).toArray(), [(2.7 * l3) / 3]);
  });

  it('keeps extreme logits finite', () => {
    // log_softmax subtracts the max: logits [1000, 0] at target 0 lose log(1 + e^-1000) ≈ 0, at target 1 lose 1000
    expect(ce([f32([2, 2], [1000, 0, 1000, 0]), i32([2], [0, 1])], { reduction: 'none' }).toArray()).toEqual([0, 1000]);
  });

  it('rounds float16 results', () => {
    // uniform logits over 3 classes: ln 3 = 1.0986..., nearest float16 is 1.0986328125 (1125 * 2^-10)
    const y = ce([Tensor.from('float16', [1, 3], [2, 2, 2]), i32([1], [1])]);
    expect(y.dtype).toBe('float16');
    expect(y.toArray()).toEqual([1.0986328125]);
  });
});

describe('loss shape inference', () => {
  it('matches the kernel for every reduction and layout', () => {
    const cases: [number[], number[]][] = [
      [[5], []],
      [[2, 5], [2]],
      [[2, 5, 3, 4], [2, 3, 4]],
    ];
    for (const op of ['nll_loss', 'cross_entropy']) {
      for (const [xs, ts] of cases) {
        const x = Tensor.full('float32', xs, -1);
        const t = Tensor.zeros('int32', ts);
        for (const reduction of ['none', 'sum', 'mean']) {
          const y = runOp(op, [x, t], { reduction })[0]!;
          expect(y.shape).toEqual(reduction === 'none' ? ts : []);
        }
      }
    }
  });

  it('marks targets and weights as not differentiable', () => {
    for (const op of ['nll_loss', 'cross_entropy']) {
      const def = getOpDef(op)!;
      expect([0, 1, 2].map((i) => operandDifferentiable(def, i))).toEqual([true, false, false]);
    }
  });
});

describe('loss errors', () => {
  function build(op: string, xs: number[], ts: number[], attrs: AttrInput = {}, tdtype: 'int32' | 'float32' = 'int32', ws?: number[]) {
    const g = new GraphBuilder();
    const vs = [g.input('x', 'float32', xs), g.input('t', tdtype, ts)];
    if (ws) vs.push(g.input('w', 'float32', ws));
    return () => g.op(op, vs, attrs);
  }
  it('names mismatched shapes and types', () => {
    expect(build('nll_loss', [4, 10], [4, 1])).toThrow(DiagnosticError);
    expect(build('nll_loss', [4, 10], [4, 1])).toThrow('nll_loss: target [4,1] does not match input [4,10] (expected target [4])');
    expect(build('cross_entropy', [4, 10, 7], [4, 6])).toThrow('cross_entropy: target [4,6] does not match input [4,10,7] (expected target [4,7])');
    expect(build('nll_loss', [4, 10], [4], {}, 'float32')).toThrow('nll_loss: target must be i32 class indices, got f32');
    expect(build('nll_loss', [4, 10], [4], {}, 'int32', [4])).toThrow('nll_loss: weight [4] must have shape [10] (the classes of input [4,10])');
  });
  it('rejects bad attributes', () => {
    expect(build('cross_entropy', [4, 10], [4], { label_smoothing: 1.5 })).toThrow('cross_entropy: label_smoothing must be in [0, 1], got 1.5');
    expect(build('nll_loss', [4, 10], [4], { reduction: 'avg' })).toThrow(`nll_loss: attribute 'reduction' must be one of "mean", "sum", "none"`);
  });
});
