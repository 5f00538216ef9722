import { Diagnostic, DiagnosticError, SourceLookup, renderDiagnostic, selectFrame } from '@tilegraph/ir';

/** A diagnostic that knows how much to underline at each frame of its location. */
export type DslDiagnostic = Diagnostic & { readonly frameSpans?: readonly number[] };

/**
 * Errors of a model file: every diagnostic found (syntax errors of all files, or the name, type
 * and shape errors of elaboration), with the source texts so that the message shows the
 * offending lines with carets.
 */
export class DslError extends DiagnosticError {
  readonly sources: SourceLookup;
  readonly excludes: readonly string[];

  constructor(diagnostics: readonly Diagnostic[], sources: SourceLookup, excludes: readonly string[] = []) {
    super(diagnostics);
    this.name = 'DslError';
    this.sources = sources;
    this.excludes = excludes;
    this.message = this.render();
  }

  /** `file:line:col: error: ...` with the source line and a caret, for each diagnostic. */
  render(excludes: readonly string[] = this.excludes): string {
    return this.diagnostics
      .map((d: DslDiagnostic) => {
        // Underline the token of whichever frame the excludes select.
        if (d.frameSpans && d.loc) {
          const f = selectFrame(d.loc, excludes);
          const i = f ? d.loc.frames.indexOf(f) : -1;
          d = { ...d, span: d.frameSpans[i] ?? 1 };
        }
        return renderDiagnostic(d, { sources: this.sources, excludes });
      })
      .join('\n');
  }
}
