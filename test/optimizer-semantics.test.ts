import { Options } from '@tilegraph/frontend';
import { DiagnosticError, Graph, GraphBuilder, Tensor } from '@tilegraph/ir';
import { OptimizerArgs, OptimizerType, defaultMeanStrategy, makeOptimizer } from '@tilegraph/passes';
import { trainingModel } from './support/reference.js';
import { expectClose, thrown } from './support/sessions.js';

/**
 * Optimizer defaults and rules checked against PopTorch's documented behaviour
 * (graphcore/poptorch python/optim.py).
 */

/** loss = Σ w·x over the micro-batch (x [2], w scalar), so dloss/dw = x0 + x1. */
function linearSum(w0: number): Graph {
  const b = new GraphBuilder('linsum');
  const x = b.input('x', 'float32', [2]);
  const w = b.parameter('w', 'float32', [], Tensor.scalar('float32', w0));
  b.output('loss', b.op('identity_loss', [b.op('mul', [x, w])], { reduction: 'sum' }));
  return b.graph;
}

/** One step from w0 with gradient g (x = [g, 0]); returns the new w. */
function oneStep(type: OptimizerType, args: OptimizerArgs, w0: number, g: number): number {
  const m = trainingModel(linearSum(w0), new Options(), makeOptimizer(type, args));
  m.run({ x: Tensor.from('float32', [2], [g, 0]) });
  return m.stateDict()['w']!.data[0]!;
}

describe('RMSprop use_tf_variant', () => {
  test('the squared-gradient average starts at ones (PopTorch: "initialized to ones")', () => {
    // lr 0.01, alpha 0.9, eps 1e-8, g = 2: v = 0.9·1 + 0.1·4 = 1.3; w = 1 − 0.01·2/√(1.3 + 1e-8) ≈ 0.982459.
    // A zero start would give v = 0.4 and w ≈ 0.968377.
    const w = oneStep('RMSprop', { lr: 0.01, alpha: 0.9, use_tf_variant: true }, 1, 2);
    expectClose([w], [1 - (0.01 * 2) / Math.sqrt(1.3 + 1e-8)], 1e-6, 1e-6);
  });

  test('the torch variant still starts at zeros', () => {
    // v = 0.1·4 = 0.4; w = 1 − 0.01·2/(√0.4 + 1e-8)
    const w = oneStep('RMSprop', { lr: 0.01, alpha: 0.9 }, 1, 2);
    expectClose([w], [1 - (0.01 * 2) / (Math.sqrt(0.4) + 1e-8)], 1e-6, 1e-6);
  });
});

describe('LAMB max_weight_norm', () => {
  test('defaults to 65500 as in PopTorch (the float16 maximum)', () => {
    expect(makeOptimizer('LAMB').hyper['max_weight_norm']).toBe(65500);
  });

  test('the default caps ‖w‖ above 65500', () => {
    // scalar w = 1e5, g = 1, step 1 with bias correction: m̂ = 1, v̂ = 1, r ≈ 1, u = r + 0.01·1e5 ≈ 1001 > 0.
    // trust = min(1e5, 65500) / |u|, so w − lr·trust·u = 1e5 − 0.001·65500 = 99934.5
    // (uncapped it would be 1e5 − 0.001·1e5 = 99900).
    const w = oneStep('LAMB', {}, 1e5, 1);
    expectClose([w], [99934.5], 0.02, 0);
  });

  test('can be changed by setOptimizer after compilation', () => {
    const m = trainingModel(linearSum(2), new Options(), makeOptimizer('LAMB'));
    m.run({ x: Tensor.from('float32', [2], [0, 0]) }); // compile; g = 0 moves w by the decay term only
    const before = m.stateDict()['w']!.data[0]!;
    m.setOptimizer({ max_weight_norm: 1 });
    m.run({ x: Tensor.from('float32', [2], [1, 0]) });
    // for a scalar, lr·trust·u = lr·min(|w|, 1)·sign(u) with u > 0 here: w drops by exactly 0.001
    expectClose([m.stateDict()['w']!.data[0]!], [before - 0.001], 1e-6, 0);
  });
});

describe('momentum element types default to float32 whatever accum_type is (PopTorch)', () => {
  test.each([
    ['Adam', { accum_type: 'float16' }, 'w.exp_avg'],
    ['SGD', { lr: 0.1, momentum: 0.9, accum_type: 'float16' }, 'w.momentum'],
    ['RMSprop', { momentum: 0.5, centered: true, accum_type: 'float16' }, 'w.momentum_buffer'],
  ] as const)('%s', (type, args, state) => {
    const spec = makeOptimizer(type, args);
    expect(spec.accumType).toBe('float16');
    expect(spec.firstOrderMomentumAccumType).toBe('float32');
    const m = trainingModel(linearSum(1), new Options(), spec);
    m.run({ x: Tensor.from('float32', [2], [1, 0]) });
    expect(m.readTensor(state).dtype).toBe('float32');
    expect(m.readTensor('w.accum').dtype).toBe('float16');
  });

  test("SGD accepts PopTorch's velocity_accum_type for its momentum", () => {
    const spec = makeOptimizer('SGD', { lr: 0.1, momentum: 0.9, velocity_accum_type: 'float16' });
    expect(spec.firstOrderMomentumAccumType).toBe('float16');
    expect(spec.accumType).toBe('float32');
  });
});

describe('the default mean reduction strategy (PopTorch _optimizer_attributes)', () => {
  test('float16 accumulator: Running', () => {
    expect(defaultMeanStrategy(makeOptimizer('SGD', { lr: 0.1, accum_type: 'float16' }))).toBe('running');
  });
  test('float16 accumulator with the combined SGD variant: Post (the only strategy it supports)', () => {
    expect(defaultMeanStrategy(makeOptimizer('SGD', { lr: 0.1, accum_type: 'float16', use_combined_accum: true }))).toBe('post');
  });
  test('float32 accumulator: Post', () => {
    expect(defaultMeanStrategy(makeOptimizer('Adam'))).toBe('post');
  });
});

describe('hyperparameter values are checked when they change', () => {
  test('setOptimizer with NaN or a string is a diagnostic, and the optimizer is unchanged', () => {
    const m = trainingModel(linearSum(1), new Options(), makeOptimizer('SGD', { lr: 0.1, momentum: 0.9 }));
    m.run({ x: Tensor.from('float32', [2], [1, 0]) });
    const nan = thrown(() => m.setOptimizer({ dampening: NaN }));
    expect(nan).toBeInstanceOf(DiagnosticError);
    expect(nan.message).toContain('dampening must be a number, got NaN');
    const str = thrown(() => m.setOptimizer({ lr: '0.5' as unknown as number }));
    expect(str).toBeInstanceOf(DiagnosticError);
    expect(str.message).toContain('lr must be a number, got "0.5"');
    expect(m.currentOptimizer.hyper['dampening']).toBe(0);
    expect(m.currentOptimizer.hyper['lr']).toBe(0.1);
  });

  test('a LAMB max_weight_norm that is not positive is a diagnostic (it would reverse the step)', () => {
    expect(thrown(() => makeOptimizer('LAMB', { max_weight_norm: -1 })).message).toContain('max_weight_norm must be > 0, got -1');
  });
});
