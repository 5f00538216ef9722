import { Graph, Value } from './graph.js';

/**
 * A copy of a graph with fresh values: same ops, attributes, locations, scopes, annotations and
 * outputs. Passes that must leave their input untouched work on a clone. O(ops + uses).
 */
export function cloneGraph(g: Graph, name = g.name): { graph: Graph; map: Map<Value, Value> } {
  const out = new Graph(name);
  const map = new Map<Value, Value>();
  for (const op of g.topologicalOrder() ?? g.ops) {
    const copy = out.insertOp(
      op.def,
      op.operands.map((v) => map.get(v)!),
      op.attrs,
      { loc: op.loc, scope: op.scope, annotations: op.annotations, names: op.results.map((r) => r.name) },
      op.results.map((r) => r.type),
    );
    op.results.forEach((r, i) => map.set(r, copy.results[i]!));
  }
  for (const o of g.outputs) out.addOutput(o.name, map.get(o.value)!);
  return { graph: out, map };
}
