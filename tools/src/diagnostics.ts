import * as fs from 'node:fs';
import { Diagnostic, DiagnosticError, renderDiagnostic } from '@tilegraph/ir';

/** Reads source files on demand so diagnostics can show the offending line. */
export function fileSources(): (file: string) => string | undefined {
  const cache = new Map<string, string | undefined>();
  return (file) => {
    if (!cache.has(file)) {
      let text: string | undefined;
      try {
        if (!file.endsWith('.onnx') && fs.statSync(file).size < 16 * 1024 * 1024) text = fs.readFileSync(file, 'utf8');
      } catch {
        text = undefined;
      }
      cache.set(file, text);
    }
    return cache.get(file);
  };
}

export interface Reporter {
  excludes: readonly string[];
  report(ds: readonly Diagnostic[]): void;
}

export function stderrReporter(excludes: readonly string[] = []): Reporter {
  const sources = fileSources();
  return {
    excludes,
    report(ds) {
      for (const d of ds) process.stderr.write(renderDiagnostic(d, { sources, excludes }) + '\n');
    },
  };
}

export function isDiagnosticError(e: unknown): e is DiagnosticError {
  return e instanceof DiagnosticError || (e instanceof Error && Array.isArray((e as DiagnosticError).diagnostics));
}

/** A problem with the command line itself (not with the model): exit code 2. */
export class UsageError extends Error {}
