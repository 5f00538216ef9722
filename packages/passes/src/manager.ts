import { Diagnostic, DiagnosticError, Graph, Pausable, error, printGraph, verifyGraph, runToEnd } from '@tilegraph/ir';
import { Pass, PassContext } from './pass.js';

export interface PrintOptions {
  debugInfo: boolean;
  locationExcludes?: readonly string[];
}

/** How a pipeline prints and verifies the unit it transforms. */
export interface UnitKind<T> {
  print(unit: T, opts: PrintOptions): string;
  verify(unit: T): Diagnostic[];
  /** The number of ops in the unit, recorded after each pass. */
  count?(unit: T): number;
}

export const GRAPH_UNIT: UnitKind<Graph> = {
  print: (g, o) => printGraph(g, { debugInfo: o.debugInfo, ...(o.locationExcludes ? { locationExcludes: o.locationExcludes } : {}) }),
  verify: (g) => verifyGraph(g),
  count: (g) => g.numOps,
};

export interface PassManagerOptions {
  /** Verify the IR after every pass (default true). A failure names the pass: it is a compiler bug. */
  verify?: boolean;
  /** Print the IR after these passes (`--print-ir-after=autograd`). */
  printIrAfter?: readonly string[];
  /** Print the IR after every pass. */
  printIrAfterAll?: boolean;
  /** Print the IR after every pass that changed it. */
  printIrAfterChange?: boolean;
  /** Print locations in dumps. */
  debugInfo?: boolean;
  locationExcludes?: readonly string[];
  /** Where dumps go (default: stderr). */
  dump?: (text: string) => void;
}

export interface PassTiming {
  readonly pass: string;
  readonly ms: number;
  /** Ops in the unit after the pass, when its kind counts them. */
  readonly ops?: number;
}

export interface PipelineResult<T> {
  readonly unit: T;
  readonly timings: readonly PassTiming[];
  readonly diagnostics: readonly Diagnostic[];
}

/** Runs a pipeline of named passes with verification, IR dumps and per-pass timing. */
export class PassManager<T = Graph> {
  readonly passes: readonly Pass<T>[];
  private readonly opts: PassManagerOptions;
  private readonly kind: UnitKind<T>;

  constructor(passes: readonly Pass<T>[], opts: PassManagerOptions = {}, kind: UnitKind<T> = GRAPH_UNIT as unknown as UnitKind<T>) {
    const names = new Set(passes.map((p) => p.name));
    for (const n of opts.printIrAfter ?? []) {
      if (!names.has(n)) {
        throw new DiagnosticError(
          error(`--print-ir-after: no pass named '${n}' in this pipeline`, undefined, [`passes: ${passes.map((p) => p.name).join(', ')}`]),
        );
      }
    }
    this.passes = passes;
    this.opts = opts;
    this.kind = kind;
  }

  run(unit: T, options: Readonly<Record<string, unknown>> = {}): PipelineResult<T> {
    return runToEnd(this.steps(unit, options));
  }

  /** run(), pausing after each pass (so an asynchronous compile lets the event loop run between passes). */
  *steps(unit: T, options: Readonly<Record<string, unknown>> = {}): Pausable<PipelineResult<T>> {
    const ctx: PassContext = { options, diagnostics: [] };
    const dump = this.opts.dump ?? ((t: string) => process.stderr.write(t));
    const printOpts: PrintOptions = {
      debugInfo: !!this.opts.debugInfo,
      ...(this.opts.locationExcludes ? { locationExcludes: this.opts.locationExcludes } : {}),
    };
    const after = new Set(this.opts.printIrAfter ?? []);
    const timings: PassTiming[] = [];
    let u = unit;
    for (const pass of this.passes) {
      const before = this.opts.printIrAfterChange ? this.kind.print(u, printOpts) : undefined;
      const t0 = performance.now();
      u = pass.run(u, ctx);
      const ms = performance.now() - t0;
      timings.push({ pass: pass.name, ms, ...(this.kind.count ? { ops: this.kind.count(u) } : {}) });
      if (this.opts.verify ?? true) {
        const problems = this.kind.verify(u).filter((d) => d.severity === 'error');
        if (problems.length) {
          throw new DiagnosticError([
            error(`internal compiler error: the IR is invalid after pass '${pass.name}'`, undefined, ['please report this with the model']),
            ...problems,
          ]);
        }
      }
      const text = after.has(pass.name) || this.opts.printIrAfterAll || before !== undefined ? this.kind.print(u, printOpts) : undefined;
      if (text !== undefined && (after.has(pass.name) || this.opts.printIrAfterAll || text !== before)) {
        dump(`// ----- IR after ${pass.name} -----\n${text}\n`);
      }
      yield;
    }
    return { unit: u, timings, diagnostics: ctx.diagnostics };
  }
}

/** The per-pass timing table `--time-passes` prints, longest first. */
export function formatTimings(ts: readonly PassTiming[]): string {
  const total = ts.reduce((s, t) => s + t.ms, 0);
  const w = Math.max(4, ...ts.map((t) => t.pass.length));
  const lines = [...ts]
    .sort((a, b) => b.ms - a.ms)
    .map((t) => `  ${t.pass.padEnd(w)}  ${t.ms.toFixed(2).padStart(9)} ms  ${total > 0 ? ((100 * t.ms) / total).toFixed(1).padStart(5) : '  0.0'}%`);
  return [`pass timing (total ${total.toFixed(2)} ms):`, ...lines].join('\n');
}
