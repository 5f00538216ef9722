import {
  DiagnosticError,
  Graph,
  KernelContext,
  Op,
  Tensor,
  Value,
  error,
  formatShape,
  formatType,
  initialParameterValue,
  numElements,
  shapesEqual,
} from '@tilegraph/ir';

export interface RunOptions {
  /** Parameter values by name; parameters not given start from their initializers. */
  parameters?: ReadonlyMap<string, Tensor> | Readonly<Record<string, Tensor>>;
  seed?: number;
  step?: number;
  print?: (line: string) => void;
  /** Also return every intermediate value (by value id); for debugging and pass tests. */
  keepAll?: boolean;
}

export interface RunResult {
  outputs: Record<string, Tensor>;
  /** Values written by `assign` ops, by parameter/variable name (applied by the caller). */
  assigns: Map<string, Tensor>;
  values?: Map<Value, Tensor>;
}

function lookup(m: RunOptions['parameters'], name: string): Tensor | undefined {
  if (!m) return undefined;
  return m instanceof Map ? m.get(name) : (m as Record<string, Tensor>)[name];
}

/**
 * The reference interpreter: runs a Graph on host tensors, op by op in topological order, with
 * each op's reference kernel. It is the semantic oracle for passes and generated code, so it is
 * deliberately simple. Intermediate values are released after their last use.
 */
/**
 * The most elements one value may have here: the interpreter holds every value in host memory,
 * so a value the device could stream or broadcast (an expand to 2^31 elements) would exhaust it.
 */
export const MAX_REFERENCE_ELEMENTS = 2 ** 28;

function checkWorkingSet(order: readonly Op[]): void {
  for (const op of order) {
    for (const r of op.results) {
      const n = numElements(r.type.shape);
      if (n > MAX_REFERENCE_ELEMENTS) {
        throw new DiagnosticError(
          error(`${op.kind}: the reference interpreter cannot hold a value of ${n} elements (${formatType(r.type)}); it keeps every value in host memory, at most ${MAX_REFERENCE_ELEMENTS} (2^28) elements each`, op.loc, [
            'run it compiled (--backend ipu), or make the tensor smaller',
          ]),
        );
      }
    }
  }
}

export function runGraph(g: Graph, feeds: Readonly<Record<string, Tensor>>, opts: RunOptions = {}): RunResult {
  const order = g.topologicalOrder();
  if (!order) throw new DiagnosticError(error('cannot run a graph with a cycle'));
  checkWorkingSet(order);
  const ctx: KernelContext = { seed: opts.seed ?? 0, step: opts.step ?? 0, print: opts.print ?? ((l) => console.log(l)) };

  // last use (position in order) of each value, so dead tensors can be dropped
  const pos = new Map(order.map((op, i) => [op, i]));
  const outputSet = new Set(g.outputs.map((o) => o.value));
  const lastUse = new Map<Value, number>();
  for (const op of order) {
    for (const r of op.results) {
      let last = -1;
      for (const u of r.uses) last = Math.max(last, pos.get(u.op) ?? -1);
      lastUse.set(r, last);
    }
  }

  const env = new Map<Value, Tensor>();
  const assigns = new Map<string, Tensor>();
  const all = opts.keepAll ? new Map<Value, Tensor>() : undefined;
  const known = new Set(g.inputs().map((o) => o.attrs['name'] as string));
  for (const k of Object.keys(feeds)) {
    if (!known.has(k)) throw new DiagnosticError(error(`no model input is named '${k}' (inputs: ${[...known].join(', ') || 'none'})`));
  }

  order.forEach((op, i) => {
    let results: Tensor[];
    if (op.kind === 'input') {
      const name = op.attrs['name'] as string;
      const t = feeds[name];
      const want = op.result.type;
      if (!t) throw new DiagnosticError(error(`input '${name}' (${formatType(want)}) was not given`, op.loc));
      if (t.dtype !== want.dtype || !shapesEqual(t.shape, want.shape)) {
        throw new DiagnosticError(
          error(`input '${name}' expects ${formatType(want)} but was given ${t.dtype}${formatShape(t.shape)}`, op.loc),
        );
      }
      results = [t];
    } else if (op.kind === 'parameter' || op.kind === 'variable') {
      const name = op.attrs['name'] as string;
      const given = lookup(opts.parameters, name);
      const want = op.result.type;
      if (given && (given.dtype !== want.dtype || !shapesEqual(given.shape, want.shape))) {
        throw new DiagnosticError(error(`${op.kind} '${name}' is ${want.dtype}${formatShape(want.shape)} but was given ${given.dtype}${formatShape(given.shape)}`, op.loc));
      }
      results = [given ?? initialParameterValue(op.attrs)];
    } else {
      const args = op.operands.map((v) => {
        const t = env.get(v);
        if (!t) throw new Error(`internal: value %${v.id} used by ${op.kind} is not computed`);
        return t;
      });
      if (op.kind === 'assign') {
        const name = op.attrs['name'] as string;
        if (assigns.has(name)) throw new DiagnosticError(error(`'${name}' is assigned twice in one graph`, op.loc));
        assigns.set(name, args[0]!);
      }
      try {
        results = op.def.kernel(args, op.attrs, ctx);
      } catch (e) {
        // a kernel's own diagnostic (a custom op's WebAssembly kernel failing) gets the op's place
        if (e instanceof DiagnosticError && e.diagnostics.every((d) => !d.loc)) throw new DiagnosticError(e.diagnostics.map((d) => ({ ...d, loc: op.loc })));
        throw e;
      }
    }
    op.results.forEach((r, k) => {
      const t = results[k]!;
      env.set(r, t);
      all?.set(r, t);
    });
    for (const v of op.operands) {
      if (lastUse.get(v) === i && !outputSet.has(v)) env.delete(v);
    }
  });

  const outputs: Record<string, Tensor> = {};
  for (const o of g.outputs) outputs[o.name] = env.get(o.value)!;
  return all ? { outputs, assigns, values: all } : { outputs, assigns };
}
