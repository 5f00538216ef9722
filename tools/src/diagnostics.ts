import { Diagnostic, DiagnosticError, openedSource, renderDiagnostic } from '@tilegraph/ir';
import { colourDiagnostic, colourFor } from './colour.js';
import { noteReported } from './json.js';
import { levelOf, logEnabled } from '@tilegraph/runtime';

/**
 * Source lines for diagnostics: only the texts the compilation itself opened (the model file, its
 * imports, a text IR file, the options file; see noteOpenedSource). A location can name any path —
 * a `.tgir` file's loc() — and showing it never reads a file the compilation did not open.
 */
export function fileSources(): (file: string) => string | undefined {
  return (file) => openedSource(file);
}

const MAX_REPORTED = 100;

export interface Reporter {
  excludes: readonly string[];
  report(ds: readonly Diagnostic[]): void;
}

export function stderrReporter(excludes: readonly string[] = []): Reporter {
  const sources = fileSources();
  return {
    excludes,
    report(all) {
      // the log level (setLogLevel, TILEGRAPH_LOG_LEVEL) hides warnings and notes; errors end the command and always show
      const ds = all.filter((d) => d.severity === 'error' || logEnabled(levelOf(d.severity)));
      // a damaged file can hold thousands of errors: the first ones say what is wrong
      const shown = ds.length > MAX_REPORTED ? ds.slice(0, MAX_REPORTED) : ds;
      const colour = colourFor(process.stderr);
      for (const d of ds) noteReported(d, excludes);
      for (const d of shown) process.stderr.write(colourDiagnostic(renderDiagnostic(d, { sources, excludes }), colour) + '\n');
      if (shown.length < ds.length) {
        const more = ds.slice(MAX_REPORTED);
        const errors = more.filter((d) => d.severity === 'error').length;
        process.stderr.write(`... and ${more.length} more diagnostics (${errors} errors) not shown\n`);
      }
    },
  };
}

export function isDiagnosticError(e: unknown): e is DiagnosticError {
  return e instanceof DiagnosticError || (e instanceof Error && Array.isArray((e as DiagnosticError).diagnostics));
}

/** A problem with the command line itself (not with the model): exit code 2. */
export class UsageError extends Error {}
