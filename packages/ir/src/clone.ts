import { GraphBuilder } from './builder.js';
import { Graph, Op, Value } from './graph.js';

/**
 * Replaces an op while copying a graph: returns the values that stand for the op's results
 * (built with `b`, which carries the op's location, scope and annotations), undefined to copy
 * the op unchanged, or null to drop it (its results must then be unused).
 */
export type RewriteHook = (op: Op, operands: readonly Value[], b: GraphBuilder) => readonly Value[] | undefined | null;

/**
 * Copies a graph op by op in topological order, letting `hook` replace ops. The copy's
 * insertion order is topological again. O(ops + uses) plus what the hook builds.
 */
export function rewriteGraph(g: Graph, hook: RewriteHook | undefined, name = g.name): { graph: Graph; map: Map<Value, Value> } {
  const out = new Graph(name);
  const b = new GraphBuilder(out);
  const map = new Map<Value, Value>();
  for (const op of g.topologicalOrder() ?? g.ops) {
    const operands = op.operands.map((v) => map.get(v)!);
    b.loc = op.loc;
    b.annotations = op.annotations;
    const replaced = hook ? b.withScopePath(op.scope, () => hook(op, operands, b)) : undefined;
    if (replaced === null) continue;
    if (replaced) {
      if (replaced.length !== op.results.length) throw new Error(`rewrite of ${op.kind} gave ${replaced.length} values for ${op.results.length} results`);
      op.results.forEach((r, i) => {
        const v = replaced[i]!;
        if (r.name && !v.name) v.name = r.name;
        map.set(r, v);
      });
      continue;
    }
    const copy = out.insertOp(
      op.def,
      operands,
      op.attrs,
      { loc: op.loc, scope: op.scope, annotations: op.annotations, names: op.results.map((r) => r.name) },
      op.results.map((r) => r.type),
    );
    op.results.forEach((r, i) => map.set(r, copy.results[i]!));
  }
  for (const o of g.outputs) out.addOutput(o.name, map.get(o.value)!);
  return { graph: out, map };
}

/**
 * A copy of a graph with fresh values: same ops, attributes, locations, scopes, annotations and
 * outputs. Passes that must leave their input untouched work on a clone.
 */
export function cloneGraph(g: Graph, name = g.name): { graph: Graph; map: Map<Value, Value> } {
  return rewriteGraph(g, undefined, name);
}
