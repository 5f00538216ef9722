import { GraphBuilder, Module, Tensor, Value, collectVariables, execute, repeat, seq } from '@tilegraph/ir';
import { GC200_COST_MODEL, estimateGraphCycles } from './estimate.js';
import { generatePoplar } from './generate.js';
import { GenerateOptions } from './context.js';

/**
 * Independent generated-vertex work shares compute sets (one exchange and sync each on the IPU):
 * the updates of several weights run in one compute set, their state writes after it; work that
 * reads what another piece writes, or is separated from it by a PopLibs call, does not share.
 * test/compiled-compute-sets.test.ts counts the examples' compute sets and checks the results.
 */

const ZEROS = { kind: 'init', fn: 'zeros', args: {} } as const;

function moduleOf(b: GraphBuilder): Module {
  const graphs = new Map([[b.graph.name, b.graph]]);
  return { name: 'm', graphs, program: repeat(1, seq(execute(b.graph.name))), replicationFactor: 1, variables: collectVariables(graphs) };
}

/** An SGD update of `n` weights of different shapes: w ← w − lr·g; g ← 0. */
function sgdUpdate(n: number): GraphBuilder {
  const b = new GraphBuilder('update');
  const lr = b.constant(Tensor.scalar('float32', 0.1));
  for (let i = 0; i < n; i++) {
    const shape = [4 + i, 3];
    const w = b.parameter(`w${i}`, 'float32', shape, ZEROS);
    const g = b.op('variable', [], { name: `w${i}.grad`, dtype: 'float32', shape, init: ZEROS, role: 'accumulator' });
    b.addOp('assign', [b.op('sub', [w, b.op('mul', [g, lr])])], { name: `w${i}` });
    b.addOp('assign', [b.op('expand', [b.scalar('float32', 0)], { shape })], { name: `w${i}.grad` });
  }
  return b;
}

function host(m: Module, opts: GenerateOptions = {}): string {
  return generatePoplar(m, opts).files['host.cpp'];
}

const count = (text: string, what: string) => text.split(what).length - 1;

/** The body of one graph's function in host.cpp. */
function graphCode(text: string, graph: string): string {
  const at = text.indexOf(`// graph ${graph}\n`);
  expect(at).toBeGreaterThanOrEqual(0);
  return text.slice(at, text.indexOf('\n}\n', at));
}

describe('merged compute sets', () => {
  it('runs the independent updates of several weights in one compute set, their state writes after it', () => {
    const m = moduleOf(sgdUpdate(4));
    const merged = graphCode(host(m), 'update');
    const separate = graphCode(host(m, { mergeComputeSets: false }), 'update');
    expect(count(separate, 'addComputeSet')).toBe(4);
    expect(count(merged, 'addComputeSet')).toBe(1);
    expect(count(merged, 'poplar::program::Execute(')).toBe(1);
    // every update's vertices are in the one compute set, which runs before any weight is written
    expect(count(merged, 'addRegionVertices(d.ipu[0], cs0,')).toBe(4);
    const execute = merged.indexOf('prog.add(poplar::program::Execute(cs0));');
    const writes = [...merged.matchAll(/prog\.add\(poplar::program::Copy\([^)]*, d\.state\[\d+\]\)\);/g)];
    expect(writes).toHaveLength(8);
    for (const w of writes) expect(w.index).toBeGreaterThan(execute);
  });

  it('is deterministic', () => {
    expect(host(moduleOf(sgdUpdate(3)))).toBe(host(moduleOf(sgdUpdate(3))));
  });

  it('puts work that reads another piece of work\'s result in a later compute set', () => {
    const b = new GraphBuilder('g');
    const x = b.input('x', 'float32', [8]);
    const y = b.input('y', 'float32', [6]);
    const a = b.op('exp', [x]); // compute set 0
    const c = b.op('tanh', [y]); // independent: compute set 0
    const s = b.op('reshape', [a], { shape: [2, 4] });
    const d = b.op('neg', [b.op('reduce_sum', [s], { axes: [1], keepdims: false })]); // after a PopLibs reduce
    b.output('a', a);
    b.output('c', c);
    b.output('d', d);
    const text = graphCode(host(moduleOf(b)), 'g');
    // the exp and the tanh (different shapes: two fused vertices) share one; the neg needs the reduce
    expect(count(text, 'addComputeSet')).toBe(2);
    expect(text.indexOf('Execute(cs0)')).toBeLessThan(text.indexOf('popops::reduce'));
    expect(text.indexOf('popops::reduce')).toBeLessThan(text.indexOf('Execute(cs1)'));
  });

  it('orders dependent work within a run of vertex work, and lets later independent work join earlier compute sets', () => {
    const b = new GraphBuilder('g');
    const x = b.input('x', 'float32', [8]);
    const y = b.input('y', 'float32', [6]);
    const a = b.op('exp', [x]);
    // a different shape: a vertex of its own reading a's result, so in the next compute set
    const r = b.op('reshape', [a], { shape: [2, 4] });
    const e = b.op('relu', [r]);
    const c = b.op('tanh', [y]); // independent of both: joins the first compute set
    b.output('e', e);
    b.output('c', c);
    const text = graphCode(host(moduleOf(b)), 'g');
    expect(count(text, 'addComputeSet')).toBe(2);
    expect(text.indexOf('prog.add(poplar::program::Execute(cs0));')).toBeLessThan(text.indexOf('prog.add(poplar::program::Execute(cs1));'));
    // the tanh's vertices are in cs0
    const tanh = text.indexOf('fused: %' + c.id);
    const vertices = text.slice(tanh).match(/addRegionVertices\(d\.ipu\[0\], (cs\d+),/);
    expect(vertices?.[1]).toBe('cs0');
  });

  it('fuses two element-wise chains that meet in one op into one vertex (a ReLU mask and the gradient it gates)', () => {
    const b = new GraphBuilder('g');
    const x = b.input('x', 'float32', [64]);
    const g1 = b.input('g1', 'float32', [64]);
    const g2 = b.input('g2', 'float32', [64]);
    const mask = b.op('cast', [b.op('greater', [x, b.scalar('float32', 0)])], { to: 'float32' });
    const grad = b.op('add', [g1, g2]);
    b.output('dx', b.op('mul', [grad, mask]));
    const text = graphCode(host(moduleOf(b)), 'g');
    expect(count(text, 'addComputeSet')).toBe(1);
    expect(count(text, 'addRegionVertices(')).toBe(1);
    expect(text).toMatch(/fused: (%\d+=(greater|cast|add|mul) ?){4}/);
  });

  it('does not move work that reads a state across the write of that state', () => {
    // u reads w's old value after the update of w is written: the write waits for u's compute set
    const b = new GraphBuilder('update');
    const w = b.parameter('w', 'float32', [5], ZEROS);
    const v = b.parameter('v', 'float32', [7], ZEROS);
    b.addOp('assign', [b.op('mul', [w, b.scalar('float32', 2)])], { name: 'w' });
    const u: Value = b.op('add', [b.op('reduce_sum', [w], { axes: [0], keepdims: false }), b.scalar('float32', 1)]);
    b.addOp('assign', [b.op('add', [v, u])], { name: 'v' });
    const text = graphCode(host(moduleOf(b)), 'update');
    const writeW = text.indexOf('d.state[0]));');
    expect(writeW).toBeGreaterThan(text.indexOf('popops::reduce'));
  });

  it('the estimate pays one sync per compute set', () => {
    const g = sgdUpdate(4).graph;
    const merged = estimateGraphCycles(g);
    const separate = estimateGraphCycles(g, { mergeComputeSets: false });
    const syncs = (e: typeof merged, kind: string) => e.byOp.filter((o) => o.kind === kind).reduce((n, o) => n + o.sync, 0);
    // the muls share one compute set; each sub depends on its mul: a second one
    expect(syncs(separate, 'mul') + syncs(separate, 'sub')).toBe(8 * GC200_COST_MODEL.syncCycles);
    expect(syncs(merged, 'mul') + syncs(merged, 'sub')).toBe(2 * GC200_COST_MODEL.syncCycles);
    expect(separate.cycles - merged.cycles).toBe(6 * GC200_COST_MODEL.syncCycles);
  });
});
