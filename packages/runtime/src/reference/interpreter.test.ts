import { GraphBuilder, Tensor, DiagnosticError } from '@tilegraph/ir';
import { runGraph } from './interpreter.js';

describe('reference interpreter', () => {
  it('runs a small graph with broadcasting', () => {
    const b = new GraphBuilder('g');
    const x = b.input('x', 'float32', [2, 3]);
    const w = b.parameter('w', 'float32', [3], Tensor.from('float32', [3], [1, 2, 3]));
    const y = b.op('relu', [b.op('sub', [x, w])]);
    b.output('y', y);
    const r = runGraph(b.graph, { x: Tensor.from('float32', [2, 3], [0, 5, 1, 4, 0, 9]) });
    expect(r.outputs['y']!.toArray()).toEqual([0, 3, 0, 3, 0, 6]);
  });
  it('reports a missing input as a diagnostic', () => {
    const b = new GraphBuilder('g');
    b.output('y', b.op('neg', [b.input('x', 'float32', [2])]));
    expect(() => runGraph(b.graph, {})).toThrow(DiagnosticError);
  });
  it('rejects mismatched operand types at build time with the op name', () => {
    const b = new GraphBuilder('g');
    const x = b.input('x', 'float32', [2]);
    const i = b.input('i', 'int32', [2]);
    expect(() => b.op('add', [x, i])).toThrow(/add: operand types differ/);
  });
});
