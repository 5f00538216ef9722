import { DiagnosticError, GraphBuilder, Tensor } from '@tilegraph/ir';
import { runGraph } from '@tilegraph/runtime';
import { thrown } from './support/sessions.js';

/** The reference interpreter checks what it is given, as it checks its inputs. */

function dot() {
  const b = new GraphBuilder('dot');
  const x = b.input('x', 'float32', [2]);
  const w = b.parameter('w', 'float32', [2], Tensor.from('float32', [2], [1, 1]));
  b.output('y', b.op('reduce_sum', [b.op('mul', [x, w])]));
  return b.graph;
}

describe('runGraph parameters', () => {
  const x = Tensor.from('float32', [2], [1, 2]);

  test('a given parameter value is used', () => {
    // 1·3 + 2·4 = 11
    expect(runGraph(dot(), { x }, { parameters: { w: Tensor.from('float32', [2], [3, 4]) } }).outputs['y']!.toArray()).toEqual([11]);
  });

  test('a parameter value of the wrong shape is a diagnostic, not a silently wrong result', () => {
    const e = thrown(() => runGraph(dot(), { x }, { parameters: { w: Tensor.from('float32', [3], [3, 4, 5]) } }));
    expect(e).toBeInstanceOf(DiagnosticError);
    expect(e.message).toContain("parameter 'w' is float32[2] but was given float32[3]");
  });

  test('a parameter value of the wrong dtype is a diagnostic', () => {
    const e = thrown(() => runGraph(dot(), { x }, { parameters: { w: Tensor.from('int32', [2], [3, 4]) } }));
    expect(e).toBeInstanceOf(DiagnosticError);
    expect(e.message).toContain("parameter 'w' is float32[2] but was given int32[2]");
  });
});
