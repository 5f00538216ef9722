import type { Diagnostic, Graph } from '@tilegraph/ir';

/** What every pass may read and report to. Passes add their own fields through `options`. */
export interface PassContext {
  /** Free-form settings passes read (e.g. the compile Options). */
  readonly options: Readonly<Record<string, unknown>>;
  /** Warnings and notes collected during the pipeline. */
  readonly diagnostics: Diagnostic[];
}

/**
 * A named transformation of the IR. `run` may rewrite the graph in place or return a new one;
 * it returns the graph the next pass sees.
 */
export interface Pass {
  readonly name: string;
  readonly description: string;
  run(graph: Graph, ctx: PassContext): Graph;
}

export function definePass(name: string, description: string, run: (g: Graph, ctx: PassContext) => Graph | void): Pass {
  return { name, description, run: (g, ctx) => run(g, ctx) ?? g };
}
