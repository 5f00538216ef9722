import { DiagnosticError } from '../diagnostics.js';

/**
 * The first diagnostic `f` throws, as its message followed by its notes (one a line). Anything
 * else — no throw, or another kind of error — fails the calling test.
 */
export function thrownDiagnostic(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    if (!(e instanceof DiagnosticError)) throw new Error(`expected a DiagnosticError, got ${String(e)}`);
    const d = e.diagnostics[0]!;
    return [d.message, ...(d.notes ?? [])].join('\n');
  }
  throw new Error('expected a diagnostic, but nothing was thrown');
}
