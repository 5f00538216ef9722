import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Options } from '@tilegraph/frontend';
import { DiagnosticError, Graph, GraphBuilder, Tensor } from '@tilegraph/ir';
import { OptimizerArgs, OptimizerSpec, OptimizerType, ParamGroupArgs, VariableAttributes, makeOptimizer, markAsConstant, variableAttrs } from '@tilegraph/passes';
import * as runtime from '@tilegraph/runtime';
import { trainingModel } from './support/reference.js';
import { expectClose, sampleValue, thrown } from './support/sessions.js';

/**
 * Optimizer parameter groups (torch's param_groups, PopTorch's groups; PopART's group 0 is the
 * default group) and PopTorch's VariableAttributes. Expectations are torch's update formulas in
 * float64, written here independently of the graph.
 */

const B = 3;
const INIT: Record<string, number[]> = { 'fc1.weight': [0.5, -0.25], 'fc1.bias': [0.125], 'fc2.weight': [-0.5, 0.75] };
const NAMES = Object.keys(INIT);

/** pred = x·fc1.weight + fc1.bias + z·fc2.weight; loss = mean((pred − y)²). */
function threeWeights(): Graph {
  const b = new GraphBuilder('groups');
  const x = b.input('x', 'float32', [B, 2]);
  const z = b.input('z', 'float32', [B, 2]);
  const y = b.input('y', 'float32', [B]);
  const p = (n: string) => b.parameter(n, 'float32', [INIT[n]!.length], Tensor.from('float32', [INIT[n]!.length], INIT[n]!));
  const w1 = p('fc1.weight');
  const bias = p('fc1.bias');
  const w2 = p('fc2.weight');
  const pred = b.op('add', [b.op('add', [b.op('matmul', [x, w1]), bias]), b.op('matmul', [z, w2])]);
  const d = b.op('sub', [pred, y]);
  b.output('loss', b.op('identity_loss', [b.op('mul', [d, d])], { reduction: 'mean' }));
  return b.graph;
}

interface Data {
  x: number[][];
  z: number[][];
  y: number[];
}
function data(step: number): Data {
  const row = (k: number, o: number) => [sampleValue(4 * k + o), sampleValue(4 * k + o + 1)];
  const ks = Array.from({ length: B }, (_, i) => step * B + i);
  return { x: ks.map((k) => row(k, 0)), z: ks.map((k) => row(k, 2)), y: ks.map((k) => sampleValue(3 * k + 5)) };
}
function inputs(d: Data) {
  return { x: Tensor.from('float32', [B, 2], d.x.flat()), z: Tensor.from('float32', [B, 2], d.z.flat()), y: Tensor.from('float32', [B], d.y) };
}

/** The gradients of the loss by weight (float64). */
function grads(w: Record<string, number[]>, d: Data): Record<string, number[]> {
  const g: Record<string, number[]> = { 'fc1.weight': [0, 0], 'fc1.bias': [0], 'fc2.weight': [0, 0] };
  d.y.forEach((yi, i) => {
    const pred = d.x[i]![0]! * w['fc1.weight']![0]! + d.x[i]![1]! * w['fc1.weight']![1]! + w['fc1.bias']![0]! + d.z[i]![0]! * w['fc2.weight']![0]! + d.z[i]![1]! * w['fc2.weight']![1]!;
    const r = (2 / B) * (pred - yi);
    for (let j = 0; j < 2; j++) {
      g['fc1.weight']![j]! += r * d.x[i]![j]!;
      g['fc2.weight']![j]! += r * d.z[i]![j]!;
    }
    g['fc1.bias']![0]! += r;
  });
  return g;
}

type Hyper = Record<string, number>;

/** torch.optim.SGD, one weight's step; `buf` is its momentum buffer (undefined before the first step). */
function sgd(w: number[], g: number[], h: Hyper, state: { buf?: number[] }): number[] {
  const d = g.map((gj, j) => gj + h['weight_decay']! * w[j]!);
  let step = d;
  if (h['momentum'] !== 0) {
    state.buf = state.buf ? state.buf.map((b, j) => h['momentum']! * b + (1 - h['dampening']!) * d[j]!) : d;
    step = state.buf;
  }
  return w.map((wj, j) => wj - h['lr']! * step[j]!);
}

/** torch.optim.Adam (L2 weight decay), one weight's step t. */
function adam(w: number[], g0: number[], h: Hyper, state: { m?: number[]; v?: number[] }, t: number): number[] {
  const g = g0.map((gj, j) => gj + h['weight_decay']! * w[j]!);
  state.m = g.map((gj, j) => h['beta1']! * (state.m?.[j] ?? 0) + (1 - h['beta1']!) * gj);
  state.v = g.map((gj, j) => h['beta2']! * (state.v?.[j] ?? 0) + (1 - h['beta2']!) * gj * gj);
  const bc1 = 1 - h['beta1']! ** t;
  const bc2 = 1 - h['beta2']! ** t;
  return w.map((wj, j) => wj - (h['lr']! / bc1) * (state.m![j]! / (Math.sqrt(state.v![j]!) / Math.sqrt(bc2) + h['eps']!)));
}

/** `steps` steps of torch with each weight's group values (`hyperOf(step, weight)`). */
function expected(type: 'SGD' | 'Adam', steps: number, hyperOf: (step: number, name: string) => Hyper): Record<string, number[]> {
  let w: Record<string, number[]> = Object.fromEntries(NAMES.map((n) => [n, [...INIT[n]!]]));
  const state: Record<string, { buf?: number[]; m?: number[]; v?: number[] }> = Object.fromEntries(NAMES.map((n) => [n, {}]));
  for (let s = 0; s < steps; s++) {
    const g = grads(w, data(s));
    w = Object.fromEntries(NAMES.map((n) => [n, type === 'SGD' ? sgd(w[n]!, g[n]!, hyperOf(s, n), state[n]!) : adam(w[n]!, g[n]!, hyperOf(s, n), state[n]!, s + 1)]));
  }
  return w;
}

const SGD_FC2: ParamGroupArgs = { params: ['fc2.weight'], weight_decay: 0.001, dampening: 0.25 };
const SGD_ARGS: OptimizerArgs = { lr: 0.1, momentum: 0.9, param_groups: [{ params: ['fc1.weight', 'fc1.bias'], lr: 0.01 }, SGD_FC2] };
const SGD_DEFAULT: Hyper = { lr: 0.1, momentum: 0.9, dampening: 0, weight_decay: 0 };
const sgdHyper = (_: number, n: string): Hyper => (n === 'fc2.weight' ? { ...SGD_DEFAULT, weight_decay: 0.001, dampening: 0.25 } : { ...SGD_DEFAULT, lr: 0.01 });

const ADAM_ARGS: OptimizerArgs = {
  lr: 0.01,
  betas: [0.9, 0.99],
  param_groups: [
    { params: ['fc1.weight'], lr: 0.05, betas: [0.8, 0.9], weight_decay: 0.1 },
    { params: ['fc2.weight'], eps: 1e-3 },
  ],
};
const ADAM_DEFAULT: Hyper = { lr: 0.01, beta1: 0.9, beta2: 0.99, eps: 1e-8, weight_decay: 0 };
const adamHyper = (_: number, n: string): Hyper =>
  n === 'fc1.weight' ? { ...ADAM_DEFAULT, lr: 0.05, beta1: 0.8, beta2: 0.9, weight_decay: 0.1 } : n === 'fc2.weight' ? { ...ADAM_DEFAULT, eps: 1e-3 } : ADAM_DEFAULT;

const CASES: [OptimizerType & ('SGD' | 'Adam'), OptimizerArgs, (s: number, n: string) => Hyper][] = [
  ['SGD', SGD_ARGS, sgdHyper],
  ['Adam', ADAM_ARGS, adamHyper],
];

function train(m: runtime.TrainingModel, steps: number): Record<string, number[]> {
  for (let s = 0; s < steps; s++) m.run(inputs(data(s)));
  const sd = m.stateDict();
  return Object.fromEntries(NAMES.map((n) => [n, Array.from(sd[n]!.data)]));
}

describe('parameter groups on the reference interpreter', () => {
  test.each(CASES)('%s: each weight takes its group’s values (torch formulas)', (type, args, hyperOf) => {
    const got = train(trainingModel(threeWeights(), new Options(), makeOptimizer(type, args)), 3);
    const want = expected(type, 3, hyperOf);
    for (const n of NAMES) expectClose(got[n]!, want[n]!, 1e-6, 1e-5);
  });

  test('the groups’ variables hold what each group sets; the rest reads the default group’s', () => {
    const m = trainingModel(threeWeights(), new Options(), makeOptimizer('SGD', SGD_ARGS));
    m.run(inputs(data(0)));
    const names = m.getTensorNames();
    expect(names).toEqual(expect.arrayContaining(['optimizer.lr', 'optimizer.param_groups.1.lr', 'optimizer.param_groups.2.weight_decay', 'optimizer.param_groups.2.dampening']));
    expect(names).not.toContain('optimizer.param_groups.1.momentum');
    expect(names).not.toContain('optimizer.param_groups.2.lr');
    expect(m.readTensor('optimizer.param_groups.1.lr').data[0]).toBeCloseTo(0.01, 7);
  });

  test('momentum is per group: state only for the weights of a group with momentum', () => {
    const args: OptimizerArgs = { lr: 0.1, param_groups: [{ params: ['fc1.weight', 'fc1.bias'], lr: 0.05, momentum: 0.9, dampening: 0.1 }] };
    const m = trainingModel(threeWeights(), new Options(), makeOptimizer('SGD', args));
    const got = train(m, 3);
    const want = expected('SGD', 3, (_, n) => (n === 'fc2.weight' ? { lr: 0.1, momentum: 0, dampening: 0, weight_decay: 0 } : { lr: 0.05, momentum: 0.9, dampening: 0.1, weight_decay: 0 }));
    for (const n of NAMES) expectClose(got[n]!, want[n]!, 1e-6, 1e-5);
    const state = Object.keys(m.optimizerStateDict());
    expect(state).toEqual(expect.arrayContaining(['fc1.weight.momentum', 'fc1.bias.momentum']));
    expect(state).not.toContain('fc2.weight.momentum');
  });

  test('constant hyperparameters are baked per group', () => {
    const spec = markAsConstant(makeOptimizer('SGD', SGD_ARGS), 'lr');
    const m = trainingModel(threeWeights(), new Options(), spec);
    const got = train(m, 2);
    const want = expected('SGD', 2, sgdHyper);
    for (const n of NAMES) expectClose(got[n]!, want[n]!, 1e-6, 1e-5);
    expect(m.getTensorNames().filter((t) => t.endsWith('.lr'))).toEqual([]);
    expect(thrown(() => m.setOptimizer(makeOptimizer('SGD', { ...SGD_ARGS, constant: ['lr'], param_groups: [{ params: ['fc1.weight', 'fc1.bias'], lr: 0.02 }, SGD_FC2] }))).message).toContain(
      'lr was marked constant in param_groups[0]',
    );
  });
});

describe('setOptimizer with groups', () => {
  const withGroupLr = (lr: number) =>
    makeOptimizer('SGD', { ...SGD_ARGS, param_groups: [{ params: ['fc1.weight', 'fc1.bias'], lr }, SGD_FC2] });

  test('a group’s new lr takes effect on the next step, on the same compiled module', () => {
    const m = trainingModel(threeWeights(), new Options(), makeOptimizer('SGD', SGD_ARGS));
    m.run(inputs(data(0)));
    const compiled = m.compiledModule();
    m.setOptimizer(withGroupLr(0.03));
    m.run(inputs(data(1)));
    // plain values change the default group only: fc1.* keep the group's 0.03
    m.setOptimizer({ lr: 0.2 });
    m.run(inputs(data(2)));
    expect(m.compiledModule()).toBe(compiled);
    const sd = m.stateDict();
    const want = expected('SGD', 3, (s, n) => {
      const h = sgdHyper(s, n);
      if (n !== 'fc2.weight' && s >= 1) return { ...h, lr: 0.03 };
      if (n === 'fc2.weight' && s >= 2) return { ...h, lr: 0.2 };
      return h;
    });
    for (const n of NAMES) expectClose(sd[n]!.data, want[n]!, 1e-6, 1e-5);
    expect(m.currentOptimizer.paramGroups![0]!.hyper['lr']).toBe(0.03);
    expect(m.currentOptimizer.hyper['lr']).toBe(0.2);
  });

  test.each([
    ['another group count', () => makeOptimizer('SGD', { lr: 0.1, momentum: 0.9 }), /number of param_groups changes from 2 to 0/],
    ['another membership', () => makeOptimizer('SGD', { ...SGD_ARGS, param_groups: [{ params: ['fc1.weight'], lr: 0.01 }, { params: ['fc2.weight', 'fc1.bias'], weight_decay: 0.001, dampening: 0.25 }] }), /weights of param_groups\[0\] change/],
    ['a group setting another hyperparameter', () => makeOptimizer('SGD', { ...SGD_ARGS, param_groups: [{ params: ['fc1.weight', 'fc1.bias'], lr: 0.01, weight_decay: 0.1 }, { params: ['fc2.weight'], weight_decay: 0.001, dampening: 0.25 }] }), /param_groups\[0\] sets lr, weight_decay instead of lr/],
    ['a group’s momentum turned off', () => makeOptimizer('SGD', { ...SGD_ARGS, param_groups: [{ params: ['fc1.weight', 'fc1.bias'], lr: 0.01, momentum: 0 }, { params: ['fc2.weight'], weight_decay: 0.001, dampening: 0.25 }] }), /sets lr, momentum instead of lr/],
  ])('%s needs a new model', (_, next, message) => {
    const m = trainingModel(threeWeights(), new Options(), makeOptimizer('SGD', SGD_ARGS));
    m.run(inputs(data(0)));
    const e = thrown(() => m.setOptimizer(next()));
    expect(e).toBeInstanceOf(DiagnosticError);
    expect(e.message).toContain('needs a recompilation');
    expect(e.message).toMatch(message);
  });

  test('a group’s momentum switched between zero and non-zero changes the structure', () => {
    const spec = (m: number) => makeOptimizer('SGD', { lr: 0.1, param_groups: [{ params: ['fc2.weight'], momentum: m }] });
    const m = trainingModel(threeWeights(), new Options(), spec(0.9));
    m.run(inputs(data(0)));
    expect(thrown(() => m.setOptimizer(spec(0))).message).toMatch(/momentum changes from 0.9 to 0 in param_groups\[0\], which changes the update's structure/);
    m.setOptimizer(spec(0.5)); // non-zero to non-zero: a variable
    expect(m.readTensor('optimizer.param_groups.1.momentum').data[0]).toBe(0.5);
    // the default group's momentum turned on changes the update of the weights in no group
    expect(thrown(() => m.setOptimizer({ momentum: 0.9 })).message).toMatch(/momentum changes from 0 to 0.9, which/);
  });

  test('plain values keep every group valid', () => {
    const m = trainingModel(threeWeights(), new Options(), makeOptimizer('SGD', { lr: 0.1, momentum: 0.9, nesterov: true, param_groups: [{ params: ['fc2.weight'], lr: 0.01 }] }));
    expect(thrown(() => m.setOptimizer({ lr: -1 })).message).toContain('lr must be >= 0');
  });
});

describe('groups are kept by save and load', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-groups-'));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  test('a loaded model trains on with its groups’ current values', () => {
    const m = trainingModel(threeWeights(), new Options(), makeOptimizer('Adam', ADAM_ARGS));
    m.run(inputs(data(0)));
    const next = makeOptimizer('Adam', { ...ADAM_ARGS, param_groups: [{ params: ['fc1.weight'], lr: 0.02, betas: [0.8, 0.9], weight_decay: 0.1 }, { params: ['fc2.weight'], eps: 1e-3 }] });
    m.setOptimizer(next);
    const file = path.join(dir, 'groups.tgmodel');
    m.save(file);
    const loaded = runtime.load(file) as runtime.TrainingModel;
    try {
      expect(loaded.currentOptimizer.paramGroups).toEqual(next.paramGroups);
      expect(loaded.readTensor('optimizer.param_groups.1.lr').data[0]).toBeCloseTo(0.02, 7);
      for (let s = 1; s < 3; s++) {
        const a = m.run(inputs(data(s)));
        const b = loaded.run(inputs(data(s)));
        expect(Array.from(b['loss']!.data)).toEqual(Array.from(a['loss']!.data));
      }
      const want = expected('Adam', 3, (s, n) => (n === 'fc1.weight' && s >= 1 ? { ...adamHyper(s, n), lr: 0.02 } : adamHyper(s, n)));
      const sd = loaded.stateDict();
      for (const n of NAMES) expectClose(sd[n]!.data, want[n]!, 1e-6, 1e-5);
    } finally {
      loaded.dispose();
    }
  });
});

describe('invalid groups are diagnostics', () => {
  const compileWith = (args: OptimizerArgs) => thrown(() => trainingModel(threeWeights(), new Options(), makeOptimizer('SGD', args)).compile());

  test('a weight the model does not have, named with the model’s weights', () => {
    const e = compileWith({ lr: 0.1, param_groups: [{ params: ['fc1.weigth'], lr: 0.01 }] });
    expect(e).toBeInstanceOf(DiagnosticError);
    expect(e.message).toContain("param_groups[0] names 'fc1.weigth', which is not a weight of the model");
    expect(e.message).toContain('fc1.weight');
    expect(e.message).toContain('fc2.weight');
  });

  test('a weight in two groups', () => {
    const e = thrown(() => makeOptimizer('SGD', { lr: 0.1, param_groups: [{ params: ['fc1.weight'], lr: 0.01 }, { params: ['fc2.weight', 'fc1.weight'] }] }));
    expect(e).toBeInstanceOf(DiagnosticError);
    expect(e.message).toContain("weight 'fc1.weight' is in param_groups[0] and param_groups[1]");
    // a spec built by hand is checked against the model when compiling
    const base = makeOptimizer('SGD', { lr: 0.1 });
    const spec: OptimizerSpec = { ...base, paramGroups: [{ params: ['fc1.weight'], hyper: { lr: 0.01 } }, { params: ['fc1.weight'], hyper: {} }] };
    expect(thrown(() => trainingModel(threeWeights(), new Options(), spec).compile()).message).toContain("weight 'fc1.weight' is in param_groups[0] and param_groups[1]");
  });

  test.each([
    ['an unknown key', { params: ['fc1.weight'], learning_rate: 0.1 }, /param_groups\[0\]: unknown key 'learning_rate'/],
    ['max_grad_norm', { params: ['fc1.weight'], max_grad_norm: 1 }, /param_groups\[0\]: max_grad_norm applies to the whole step, not to a group/],
    ['loss_scaling', { params: ['fc1.weight'], loss_scaling: 8 }, /loss_scaling applies to the whole step/],
    ['a flag', { params: ['fc1.weight'], nesterov: true }, /nesterov cannot differ between groups/],
    ['constant', { params: ['fc1.weight'], constant: ['lr'] }, /constant cannot differ between groups/],
    ['an accumulator type', { params: ['fc1.weight'], accum_type: 'float16' }, /accum_type cannot differ between groups/],
    ['no params', { lr: 0.1 }, /params must be a non-empty list of weight names/],
    ['empty params', { params: [] }, /params must be a non-empty list/],
    ['an invalid value', { params: ['fc1.weight'], momentum: -1 }, /SGD: param_groups\[0\]: momentum must be >= 0/],
    ['betas for SGD', { params: ['fc1.weight'], betas: [0.9, 0.9] }, /unknown key 'betas'/],
  ])('%s', (_, group, message) => {
    const e = thrown(() => makeOptimizer('SGD', { lr: 0.1, param_groups: [group as never] }));
    expect(e).toBeInstanceOf(DiagnosticError);
    expect(e.message).toMatch(message);
  });

  test('group values are validated merged with the defaults', () => {
    // nesterov needs momentum > 0 in every group
    expect(thrown(() => makeOptimizer('SGD', { lr: 0.1, momentum: 0.9, nesterov: true, param_groups: [{ params: ['fc1.weight'], momentum: 0 }] })).message).toContain(
      'param_groups[0]: nesterov momentum requires momentum > 0',
    );
  });

  test('specs without groups have none', () => {
    expect(makeOptimizer('SGD', { lr: 0.1 }).paramGroups).toBeUndefined();
    expect(makeOptimizer('SGD', { lr: 0.1, param_groups: [] }).paramGroups).toBeUndefined();
  });
});

describe('VariableAttributes (optimizer.variable_attrs)', () => {
  test('as PopTorch: variable by default; markAsConstant and markAsVariable switch', () => {
    const attrs = variableAttrs(makeOptimizer('SGD', { lr: 0.1 }));
    expect(attrs).toBeInstanceOf(VariableAttributes);
    expect(attrs.isConstant('lr')).toBe(false);
    const c = attrs.markAsConstant('lr');
    expect(c.constant).toEqual(['lr']);
    expect(attrs.isConstant('lr')).toBe(true);
    expect(attrs.spec).toBe(c);
    const v = attrs.markAsVariable('lr');
    expect(v.constant).toEqual([]);
    expect(attrs.isConstant('lr')).toBe(false);
    // markAsConstant twice keeps one entry, as PopTorch's set
    attrs.markAsConstant('momentum');
    expect(attrs.markAsConstant('momentum').constant).toEqual(['momentum']);
  });

  test('unknown names are diagnostics', () => {
    const attrs = variableAttrs(makeOptimizer('Adam'));
    for (const f of [() => attrs.isConstant('momentum'), () => attrs.markAsConstant('momentum'), () => attrs.markAsVariable('momentum')]) {
      const e = thrown(f);
      expect(e).toBeInstanceOf(DiagnosticError);
      expect(e.message).toContain("'momentum' is not a hyperparameter");
    }
  });

  test('a constant hyperparameter leaves the device and setOptimizer may not change it', () => {
    const spec = variableAttrs(makeOptimizer('SGD', { lr: 0.1, param_groups: [{ params: ['fc2.weight'], lr: 0.01 }] })).markAsConstant('lr');
    const m = trainingModel(threeWeights(), new Options(), spec);
    m.run(inputs(data(0)));
    expect(m.getTensorNames()).not.toContain('optimizer.lr');
    expect(m.getTensorNames()).not.toContain('optimizer.param_groups.1.lr');
    expect(thrown(() => m.setOptimizer({ lr: 0.2 })).message).toContain('lr was marked constant');
  });
});

describe('parameter groups on the compiled backend', () => {
  test.each(CASES)(
    '%s agrees with the reference interpreter within float32 rounding',
    (type, args) => {
      const spec = makeOptimizer(type, args);
      const compiled = runtime.trainingModel(threeWeights(), new Options(), spec);
      try {
        const got = train(compiled, 3);
        const ref = train(trainingModel(threeWeights(), new Options(), spec), 3);
        for (const n of NAMES) expectClose(got[n]!, ref[n]!, 1e-6, 1e-5);
        if (type === 'SGD') {
          // a group's new value reaches the device's variable
          compiled.setOptimizer(makeOptimizer('SGD', { ...args, param_groups: [{ params: ['fc1.weight', 'fc1.bias'], lr: 0.03 }, SGD_FC2] }));
          expect(compiled.readTensor('optimizer.param_groups.1.lr').data[0]).toBeCloseTo(0.03, 7);
        }
      } finally {
        compiled.dispose();
      }
    },
    300_000,
  );
});
