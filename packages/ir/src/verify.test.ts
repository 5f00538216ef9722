import fc from 'fast-check';
import { GraphBuilder } from './builder.js';
import { Graph, Op, Value } from './graph.js';
import { arbitraryGraph } from './testing/arbitrary.js';
import { verifyGraph } from './verify.js';

const messages = (g: Graph) => verifyGraph(g).map((d) => d.message);

/** The first f32 input (the generator always makes one). */
function f32Input(g: Graph): Value {
  return g.inputs().find((o) => o.result.type.dtype === 'float32')!.result;
}

/** Picks one of `xs` with a generated index. */
function choose<T>(xs: readonly T[], i: number): T {
  return xs[i % xs.length]!;
}

/** Ops with operands; appends a neg when there are none. */
function opsWithOperands(g: Graph): Op[] {
  const ops = g.ops.filter((o) => o.operands.length > 0);
  return ops.length ? ops : [g.addOp('neg', [f32Input(g)])];
}

/** Ops reachable from `op` through uses. */
function usersOf(op: Op): Op[] {
  const seen = new Set<Op>();
  const stack = [op];
  while (stack.length) {
    for (const r of stack.pop()!.results) {
      for (const u of r.uses) {
        if (!seen.has(u.op)) {
          seen.add(u.op);
          stack.push(u.op);
        }
      }
    }
  }
  return [...seen];
}

function small(): { g: Graph; x: Value; h: Value; y: Value } {
  const b = new GraphBuilder('g');
  const x = b.input('x', 'float32', [2, 3]);
  const h = b.op('relu', [x]);
  const y = b.op('cast', [h], { to: 'float16' });
  b.parameter('w', 'float32', [3], { kind: 'init', fn: 'zeros', args: {} });
  b.output('y', y);
  return { g: b.graph, x, h, y };
}

describe('verifyGraph', () => {
  it('accepts every generated graph', () => {
    fc.assert(
      fc.property(arbitraryGraph(), (g) => {
        expect(messages(g)).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });

  it('rejects a changed result type', () => {
    const { g, h } = small();
    h.type = { dtype: 'float32', shape: [3, 2] };
    // relu is now declared [3,2]; the cast after it infers f16[3,2] but declares f16[2,3]
    expect(messages(g)).toEqual(['relu: result 0 is declared f32[3,2] but inferred f32[2,3]', 'cast: result 0 is declared f16[2,3] but inferred f16[3,2]']);
    fc.assert(
      fc.property(arbitraryGraph(), fc.nat(), (g, i) => {
        const op = choose(g.ops.filter((o) => o.results.length > 0), i);
        const r = op.results[0]!;
        r.type = { dtype: r.type.dtype, shape: [...r.type.shape, 7] };
        expect(messages(g)).toContainEqual(expect.stringMatching(new RegExp(`^${op.kind}: result 0 is declared`)));
      }),
      { numRuns: 100 },
    );
  });

  it('rejects a dropped required attribute', () => {
    const { g, y } = small();
    y.producer.attrs = {};
    expect(messages(g)).toEqual(["cast: missing required attribute 'to'"]);
    fc.assert(
      fc.property(arbitraryGraph(), fc.nat(), fc.nat(), (g, i, j) => {
        const withRequired = g.ops.filter((o) => Object.values(o.def.attrs).some((s) => s.default === undefined && !s.optional));
        const op = choose(withRequired, i);
        const key = choose(
          Object.entries(op.def.attrs).filter(([, s]) => s.default === undefined && !s.optional).map(([k]) => k),
          j,
        );
        const { [key]: _dropped, ...rest } = op.attrs;
        op.attrs = rest;
        expect(messages(g)).toContain(`${op.kind}: missing required attribute '${key}'`);
      }),
      { numRuns: 100 },
    );
  });

  it('rejects an unknown attribute', () => {
    const { g, h } = small();
    h.producer.attrs = { ...h.producer.attrs, bogus: 1 };
    expect(messages(g)).toEqual(["relu: unknown attribute 'bogus'"]);
    fc.assert(
      fc.property(arbitraryGraph(), fc.nat(), (g, i) => {
        const op = choose(g.ops, i);
        op.attrs = { ...op.attrs, not_an_attribute: 1 };
        expect(messages(g)).toContain(`${op.kind}: unknown attribute 'not_an_attribute'`);
      }),
      { numRuns: 100 },
    );
  });

  it('rejects an operand from another graph', () => {
    const { g, h } = small();
    const other = small();
    g.setOperand(h.producer, 0, other.x);
    expect(messages(g)).toEqual(['relu: operand 0 is not defined by an op of this graph']);
    fc.assert(
      fc.property(arbitraryGraph(), fc.nat(), (g, i) => {
        const op = choose(opsWithOperands(g), i);
        const foreign = new GraphBuilder('other').input('z', op.operands[0]!.type.dtype, op.operands[0]!.type.shape);
        g.setOperand(op, 0, foreign);
        expect(messages(g)).toContain(`${op.kind}: operand 0 is not defined by an op of this graph`);
      }),
      { numRuns: 100 },
    );
  });

  it('rejects a use list that misses a use', () => {
    const { g, x } = small();
    x.uses.length = 0;
    expect(messages(g)).toEqual(['relu: use list of operand 0 is out of date']);
  });

  it('rejects a cycle', () => {
    const b = new GraphBuilder('g');
    const x = b.input('x', 'float32', [2]);
    const a = b.op('neg', [x]);
    const c = b.op('neg', [a]);
    b.graph.setOperand(a.producer, 0, c);
    // types still agree: only the cycle is wrong
    expect(messages(b.graph)).toEqual(['the graph has a cycle']);
    fc.assert(
      fc.property(arbitraryGraph(), fc.nat(), fc.nat(), (g, i, j) => {
        const candidates = opsWithOperands(g).filter((o) => usersOf(o).some((u) => u.results.length > 0));
        if (!candidates.length) {
          // no chain in this graph: make one
          const first = g.addOp('neg', [f32Input(g)]);
          candidates.push(first);
          g.addOp('neg', [first.result]);
        }
        const op = choose(candidates, i);
        const user = choose(usersOf(op).filter((u) => u.results.length > 0), j);
        g.setOperand(op, 0, user.results[0]!);
        expect(messages(g)).toContain('the graph has a cycle');
      }),
      { numRuns: 100 },
    );
  });

  it('rejects two parameters with one name', () => {
    const { g } = small();
    g.addOp('parameter', [], { name: 'w', dtype: 'float32', shape: [1], init: { kind: 'init', fn: 'ones', args: {} } });
    expect(messages(g)).toEqual(["parameter 'w' is defined twice"]);
    fc.assert(
      fc.property(arbitraryGraph(), fc.nat(), (g, i) => {
        let params = g.parameters();
        if (!params.length) params = [g.addOp('parameter', [], { name: 'p', dtype: 'float32', shape: [2], init: { kind: 'init', fn: 'zeros', args: {} } })];
        const name = choose(params, i).attrs['name'] as string;
        g.addOp('parameter', [], { name, dtype: 'float16', shape: [], init: { kind: 'init', fn: 'zeros', args: {} } });
        expect(messages(g)).toContain(`parameter '${name}' is defined twice`);
      }),
      { numRuns: 100 },
    );
  });

  it('reports every problem, not just the first', () => {
    const { g, x, h, y } = small();
    h.producer.attrs = { bogus: true };
    y.producer.attrs = {};
    g.addOp('parameter', [], { name: 'w', dtype: 'float32', shape: [1], init: { kind: 'init', fn: 'ones', args: {} } });
    x.type = { dtype: 'float32', shape: [5] };
    expect(messages(g)).toEqual([
      "input: result 0 is declared f32[5] but inferred f32[2,3]",
      "relu: unknown attribute 'bogus'",
      // relu still infers from its (changed) operand: f32[5] against the declared f32[2,3]
      'relu: result 0 is declared f32[2,3] but inferred f32[5]',
      "cast: missing required attribute 'to'",
      "parameter 'w' is defined twice",
    ]);
    fc.assert(
      fc.property(arbitraryGraph(), (g) => {
        // two independent problems give (at least) two diagnostics
        const input = f32Input(g).producer;
        const { name: _n, ...rest } = input.attrs;
        input.attrs = rest;
        const last = g.ops[g.ops.length - 1]!;
        last.attrs = { ...last.attrs, extra: 0 };
        const ms = messages(g);
        expect(ms).toContain("input: missing required attribute 'name'");
        expect(ms).toContain(`${last.kind}: unknown attribute 'extra'`);
      }),
      { numRuns: 50 },
    );
  });
});

describe('use lists at scale', () => {
  it('rewires every user of a widely shared value in linear time and keeps use lists exact', () => {
    // 20k users of one constant, each rewired to another constant one at a time
    const b = new GraphBuilder('g');
    const c1 = b.scalar('float32', 1);
    const c2 = b.scalar('float32', 2);
    const users = Array.from({ length: 20000 }, () => b.addOp('neg', [c1]));
    for (const u of users) b.graph.setOperand(u, 0, c2);
    expect(c1.uses.length).toBe(0);
    expect(c2.uses.length).toBe(20000);
    expect(verifyGraph(b.graph)).toEqual([]);
    for (const u of users.slice(0, 10000)) b.graph.eraseOp(u);
    expect(c2.uses.length).toBe(10000);
    expect(c2.uses.every((u) => u.op.operands[u.index] === c2 && !u.op.erased)).toBe(true);
  });
});
