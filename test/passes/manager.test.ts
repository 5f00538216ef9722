import { DiagnosticError, Graph, GraphBuilder, Tensor, Value } from '@tilegraph/ir';
import { PassManager, definePass, eliminateDeadCode, formatTimings } from '@tilegraph/passes';
import { runGraph } from '@tilegraph/runtime';

function small(): Graph {
  const b = new GraphBuilder('g');
  const x = b.input('x', 'float32', [2]);
  const unused = b.op('exp', [x]);
  b.op('neg', [unused]); // dead
  b.output('y', b.op('relu', [x]));
  return b.graph;
}

describe('PassManager', () => {
  const identityPass = definePass('nothing', 'changes nothing', () => undefined);
  const negatePass = definePass('negate-output', 'negates the output', (g: Graph) => {
    const b = new GraphBuilder(g);
    const out = g.outputs[0]!;
    const n: Value = b.op('neg', [out.value]);
    g.outputs = [{ name: out.name, value: n }];
  });

  it('prints after the named pass, after all, and after changes only', () => {
    const dumps: string[] = [];
    new PassManager([identityPass, negatePass], { printIrAfter: ['nothing'], dump: (t) => dumps.push(t) }).run(small());
    expect(dumps).toHaveLength(1);
    expect(dumps[0]).toMatch(/^\/\/ ----- IR after nothing -----\ngraph @g \{/);

    dumps.length = 0;
    new PassManager([identityPass, negatePass], { printIrAfterAll: true, dump: (t) => dumps.push(t) }).run(small());
    expect(dumps.map((d) => d.split('\n')[0])).toEqual(['// ----- IR after nothing -----', '// ----- IR after negate-output -----']);

    dumps.length = 0;
    new PassManager([identityPass, negatePass], { printIrAfterChange: true, dump: (t) => dumps.push(t) }).run(small());
    expect(dumps.map((d) => d.split('\n')[0])).toEqual(['// ----- IR after negate-output -----']);
    expect(dumps[0]).toContain('neg(');
  });

  it('rejects an unknown pass name with the list of passes', () => {
    expect(() => new PassManager([identityPass], { printIrAfter: ['autograd'] })).toThrow(/no pass named 'autograd'[\s\S]*passes: nothing/);
  });

  it('verifies after each pass and names the pass that broke the IR', () => {
    const breaker = definePass('breaker', 'corrupts a type', (g: Graph) => {
      g.ops[1]!.results[0]!.type = { dtype: 'int32', shape: [2] };
    });
    expect(() => new PassManager([breaker]).run(small())).toThrow(DiagnosticError);
    try {
      new PassManager([breaker]).run(small());
    } catch (e) {
      expect((e as DiagnosticError).diagnostics[0]!.message).toBe("internal compiler error: the IR is invalid after pass 'breaker'");
    }
    expect(() => new PassManager([breaker], { verify: false }).run(small())).not.toThrow();
  });

  it('times every pass', () => {
    const r = new PassManager([identityPass, negatePass]).run(small());
    expect(r.timings.map((t) => t.pass)).toEqual(['nothing', 'negate-output']);
    expect(formatTimings(r.timings)).toMatch(/^pass timing \(total [0-9.]+ ms\):\n {2}(nothing|negate-output)/);
  });
});

describe('dce', () => {
  it('removes unused ops and keeps the outputs', () => {
    const g = small();
    const d = eliminateDeadCode(g);
    expect(d.ops.map((o) => o.kind)).toEqual(['input', 'relu']);
    const x = Tensor.from('float32', [2], [-1, 2]);
    expect(runGraph(d, { x }).outputs['y']!.toArray()).toEqual(runGraph(g, { x }).outputs['y']!.toArray());
  });
  it('keeps ops with side effects and unused inputs', () => {
    const b = new GraphBuilder('g');
    const x = b.input('x', 'float32', [2]);
    b.input('unused', 'float32', [1]);
    b.op('ipu_print_tensor', [b.op('exp', [x])], { title: 't' });
    const d = eliminateDeadCode(b.graph);
    expect(d.ops.map((o) => o.kind)).toEqual(['input', 'input', 'exp', 'ipu_print_tensor']);
  });
});
