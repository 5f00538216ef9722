import { ModelBuilder, Options } from '@tilegraph/frontend';
import { Tensor } from '@tilegraph/ir';
import { generatePoplar } from '@tilegraph/codegen-poplar';
import { makeOptimizer } from '@tilegraph/passes';
import { referenceBackend, trainingModel } from '@tilegraph/runtime';

/**
 * set_available_memory on a lookup, as PopTorch's on an embedding or an index: the gather is
 * planned as an embedding lookup (popops::embedding::plan with the proportion, passed to
 * multiSlice) and so is its gradient's update (multiUpdateAdd); results stay those of the
 * reference. On a result no PopLibs planner takes, it is said to have no effect.
 */

const table = Tensor.from('float32', [6, 3], Array.from({ length: 18 }, (_, i) => Math.sin(i + 1)));

function lookupModel(proportion: number | undefined, onRelu = false) {
  const m = new ModelBuilder('lookup');
  const ids = m.input('ids', 'int32', [4]);
  const w = m.parameter('embedding.weight', 'float32', [6, 3], table);
  let rows = m.gather(w, ids);
  if (proportion !== undefined) rows = m.setAvailableMemory(rows, proportion);
  let h = m.relu(rows);
  if (onRelu) h = m.setAvailableMemory(h, 0.4);
  m.loss(m.identityLoss(m.mul(h, h)));
  return m.graph;
}

const ids = Tensor.from('int32', [4], [5, 0, 5, 2]);

describe('set_available_memory on a gather', () => {
  test('plans the lookup and its gradient update with the proportion', () => {
    const model = trainingModel(lookupModel(0.2), new Options(), makeOptimizer('SGD', { lr: 0.5 }), { backend: referenceBackend });
    const host = generatePoplar(model.compiledModule()).files['host.cpp'];
    const plans = host.match(/popops::embedding::plan\([^;]*"availableMemoryProportion", "0\.2"[^;]*;/g) ?? [];
    expect(plans).toHaveLength(2);
    expect(plans.some((p) => p.includes('"usedForUpdate", "false"'))).toBe(true);
    expect(plans.some((p) => p.includes('"operationForUpdate", "add"'))).toBe(true);
    expect(host).toMatch(/popops::multiSlice\([^;]*plan/);
    expect(host).toMatch(/popops::multiUpdateAdd\([^;]*plan/);
    // without the annotation, the default plan
    const plain = trainingModel(lookupModel(undefined), new Options(), makeOptimizer('SGD', { lr: 0.5 }), { backend: referenceBackend });
    expect(generatePoplar(plain.compiledModule()).files['host.cpp']).not.toContain('embedding::plan');
  });

  test('trains as the reference does (repeated ids add up)', () => {
    const weights = (reference: boolean) => {
      const model = trainingModel(lookupModel(0.2), new Options(), makeOptimizer('SGD', { lr: 0.5 }), reference ? { backend: referenceBackend } : {});
      model.run({ ids });
      model.run({ ids });
      const w = model.stateDict()['embedding.weight']!;
      model.dispose();
      return Array.from(w.data);
    };
    const expected = weights(true);
    weights(false).forEach((v, i) => expect(v).toBeCloseTo(expected[i]!, 6));
    // the rows looked up did move
    expect(expected.slice(0, 3)).not.toEqual(Array.from(table.data.slice(0, 3)));
  }, 300_000);

  test('on the result of any other op it says that it has no effect', () => {
    const model = trainingModel(lookupModel(undefined, true), new Options(), makeOptimizer('SGD', { lr: 0.5 }), { backend: referenceBackend });
    model.compile();
    const said = model.warnings.map((w) => w.message);
    expect(said).toContain("set_available_memory on the result of 'relu' has no effect: it plans matrix products, convolutions and lookups (gather, embedding)");
    expect(said.filter((m) => m.includes('set_available_memory'))).toHaveLength(1);
  });
});
