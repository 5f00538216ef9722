import { ModelBuilder, Options } from '@tilegraph/frontend';
import { Tensor } from '@tilegraph/ir';
import { makeOptimizer } from '@tilegraph/passes';
import { referenceBackend, trainingModel } from '@tilegraph/runtime';

/**
 * ipu_print_tensor in training, as PopTorch's print_gradient=True: the forward pass prints the
 * tensor as "title: values", the backward pass its gradient as "title_gradient: values" — on the
 * reference interpreter and on the compiled program alike. print_gradient=false prints no gradient.
 */

const xs = Tensor.from('float32', [2, 3], [0.5, -1, 2, 1.5, 0.25, -0.75]);

function train(printGradient: boolean, reference: boolean): string[] {
  const m = new ModelBuilder('printed');
  const x = m.input('x', 'float32', [2, 3]);
  const h = m.linear(x, 3, 2, { name: 'fc', bias: false });
  const p = m.ipuPrintTensor(h, 'h', printGradient);
  // loss = mean(p²): its gradient with respect to p is 2p / 4 = p / 2
  m.loss(m.identityLoss(m.mul(p, p)));
  const lines: string[] = [];
  const model = trainingModel(m.graph, new Options(), makeOptimizer('SGD', { lr: 0.1 }), { print: (l) => lines.push(l), ...(reference ? { backend: referenceBackend } : {}) });
  model.run({ x: xs });
  model.dispose();
  return lines;
}

/** The numbers of a printed "title: [[a, b], [c, d]]" line. */
function values(line: string | undefined): number[] {
  return JSON.parse(line!.slice(line!.indexOf(':') + 1)).flat();
}

describe.each([
  ['the reference interpreter', true],
  ['the compiled program', false],
])('on %s', (_, reference) => {
  test('the gradient is printed under title_gradient, after the forward value', () => {
    const lines = train(true, reference);
    const forward = lines.find((l) => l.startsWith('h: '));
    const backward = lines.find((l) => l.startsWith('h_gradient: '));
    expect(forward).toBeDefined();
    expect(backward).toBeDefined();
    expect(lines.indexOf(backward!)).toBeGreaterThan(lines.indexOf(forward!));
    const h = values(forward);
    values(backward).forEach((g, i) => expect(g).toBeCloseTo(h[i]! / 2, 6));
  }, 300_000);

  test('print_gradient=false prints the forward value only', () => {
    const lines = train(false, reference);
    expect(lines.filter((l) => l.startsWith('h: '))).toHaveLength(1);
    expect(lines.some((l) => l.includes('_gradient'))).toBe(false);
  }, 300_000);
});
