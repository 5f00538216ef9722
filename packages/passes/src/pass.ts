import type { Diagnostic, Graph } from '@tilegraph/ir';

/** What every pass may read and report to. */
export interface PassContext {
  /** Free-form settings passes read (e.g. the compile options). */
  readonly options: Readonly<Record<string, unknown>>;
  /** Warnings and notes collected during the pipeline. */
  readonly diagnostics: Diagnostic[];
}

/**
 * A named transformation of an IR unit (a Graph, or the state of a training pipeline). `run`
 * may rewrite in place or return a new unit; it returns what the next pass sees.
 */
export interface Pass<T = Graph> {
  readonly name: string;
  readonly description: string;
  run(unit: T, ctx: PassContext): T;
}

export function definePass<T = Graph>(name: string, description: string, run: (unit: T, ctx: PassContext) => T | void): Pass<T> {
  return { name, description, run: (u, ctx) => run(u, ctx) ?? u };
}
