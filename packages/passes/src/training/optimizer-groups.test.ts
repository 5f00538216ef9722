import { GraphBuilder, Tensor } from '@tilegraph/ir';
import { DEFAULT_STEP, buildTrainingModule } from './module.js';
import { checkParamGroups, groupHyper, groupIndex, makeOptimizer, updateHyper } from './optimizer.js';

/** loss = Σ (a·x + b·x); a, b: f32[2]. */
function twoWeights() {
  const g = new GraphBuilder('two');
  const x = g.input('x', 'float32', [2]);
  const a = g.parameter('a', 'float32', [2], Tensor.from('float32', [2], [1, 2]));
  const b = g.parameter('b', 'float32', [2], Tensor.from('float32', [2], [3, 4]));
  g.output('loss', g.op('identity_loss', [g.op('add', [g.op('mul', [a, x]), g.op('mul', [b, x])])], { reduction: 'sum' }));
  return g.graph;
}

const variables = (spec: ReturnType<typeof makeOptimizer>) => [...buildTrainingModule(twoWeights(), DEFAULT_STEP, spec).module.variables.keys()];

describe('parameter groups in the update graph', () => {
  test('a group with momentum while the default has none: state and variables for its weights only', () => {
    const vars = variables(makeOptimizer('SGD', { lr: 0.1, param_groups: [{ params: ['b'], momentum: 0.9, lr: 0.01 }] }));
    expect(vars).toEqual(expect.arrayContaining(['optimizer.lr', 'optimizer.param_groups.1.lr', 'optimizer.param_groups.1.momentum', 'b.momentum', 'optimizer.velocity_scaling', 'optimizer.dampening']));
    expect(vars).not.toContain('a.momentum');
    expect(vars).not.toContain('optimizer.momentum');
  });

  test('without groups nothing changes', () => {
    const vars = variables(makeOptimizer('SGD', { lr: 0.1 }));
    expect(vars.filter((v) => v.startsWith('optimizer.param_groups'))).toEqual([]);
  });

  test('helpers: merged values, group of each weight, checks against the model', () => {
    const spec = makeOptimizer('Adam', { lr: 0.01, param_groups: [{ params: ['b'], betas: [0.5, 0.6] }] });
    expect(groupHyper(spec, 1)).toMatchObject({ lr: 0.01, beta1: 0.5, beta2: 0.6 });
    expect(groupHyper(updateHyper(spec, { lr: 0.02 }), 1)['lr']).toBe(0.02);
    expect([...groupIndex(spec)]).toEqual([['b', 1]]);
    expect(() => checkParamGroups(spec, ['a', 'b'])).not.toThrow();
    expect(() => checkParamGroups(spec, ['a', 'c'])).toThrow(/'b', which is not a weight of the model/);
  });
});
