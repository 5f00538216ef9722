import { Frame, Location, formatFrame, selectFrame } from './location.js';

export type Severity = 'error' | 'warning' | 'note';

export interface Diagnostic {
  readonly severity: Severity;
  readonly message: string;
  readonly loc?: Location;
  /** Extra lines: hints on what to do. */
  readonly notes?: readonly string[];
  /** Length of the caret underline (default 1). */
  readonly span?: number;
}

export function error(message: string, loc?: Location, notes?: readonly string[]): Diagnostic {
  return { severity: 'error', message, ...(loc ? { loc } : {}), ...(notes ? { notes } : {}) };
}

export function warning(message: string, loc?: Location, notes?: readonly string[]): Diagnostic {
  return { severity: 'warning', message, ...(loc ? { loc } : {}), ...(notes ? { notes } : {}) };
}

/** Returns the text of a source file, when the renderer can show the offending line. */
export type SourceLookup = (file: string) => string | undefined;

export interface RenderOptions {
  sources?: SourceLookup;
  excludes?: readonly string[];
}

// C0 and C1 controls (but tab and newline), DEL, and the bidirectional overrides that reorder what a
// terminal shows: a name read from a model file must not move the cursor, recolour or hide text.
const UNPRINTABLE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** `text` with every terminal control character shown as an escape (`\u001b`), tabs and newlines kept. */
export function printable(text: string): string {
  return text.replace(UNPRINTABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * Renders `file:line:col: error: message`, then the source line and a caret under the column,
 * then the notes — the form compilers use and editors understand.
 */
const MAX_STACK_NOTES = 4;
/** Characters of a source line shown under a diagnostic. */
const MAX_SHOWN = 160;

// the last file split into lines: many diagnostics in one file split it once
let splitText: string | undefined;
let splitLines: string[] = [];
function sourceLine(text: string, line: number): string | undefined {
  if (text !== splitText) {
    splitText = text;
    splitLines = text.split(/\r?\n/);
  }
  return splitLines[line - 1];
}

export function renderDiagnostic(d: Diagnostic, opts: RenderOptions = {}): string {
  const frame: Frame | undefined = d.loc ? selectFrame(d.loc, opts.excludes) : undefined;
  const where = frame ? `${formatFrame(frame)}: ` : '';
  const lines = [`${where}${d.severity}: ${d.message}`];
  if (frame && frame.line !== undefined && opts.sources) {
    const text = opts.sources(frame.file);
    let src = text === undefined ? undefined : sourceLine(text, frame.line);
    if (src !== undefined) {
      let col = Math.max(1, frame.col ?? 1);
      let span = Math.max(1, d.span ?? 1);
      // a long line is shown around the column, so one diagnostic stays a few lines long
      if (src.length > MAX_SHOWN) {
        const from = Math.max(0, Math.min(col - 1 - 60, src.length - MAX_SHOWN));
        const head = from > 0 ? '...' : '';
        const tail = from + MAX_SHOWN < src.length ? '...' : '';
        src = `${head}${src.slice(from, from + MAX_SHOWN)}${tail}`;
        col = col - from + head.length;
        span = Math.min(span, MAX_SHOWN);
      }
      const pad = src.slice(0, col - 1).replace(/[^\t]/g, ' ');
      lines.push(`  ${src}`, `  ${pad}${'^'.repeat(span)}`);
    }
  }
  if (d.loc && frame && d.loc.frames.length > 1) {
    // the rest of the call stack, without third-party and runtime frames
    const others = d.loc.frames.filter((f) => f !== frame && !f.file.includes('node_modules/') && !f.file.startsWith('node:'));
    for (const f of others.slice(0, MAX_STACK_NOTES)) lines.push(`  note: ${f.fn ? `in ${f.fn}, ` : ''}from ${formatFrame(f)}`);
    if (others.length > MAX_STACK_NOTES) lines.push(`  note: ... and ${others.length - MAX_STACK_NOTES} more frames`);
  }
  for (const n of d.notes ?? []) lines.push(`  note: ${n}`);
  return printable(lines.join('\n'));
}

export function renderDiagnostics(ds: readonly Diagnostic[], opts: RenderOptions = {}): string {
  return ds.map((d) => renderDiagnostic(d, opts)).join('\n');
}

/** An error carrying diagnostics; tools print them and exit non-zero instead of a stack trace. */
export class DiagnosticError extends Error {
  readonly diagnostics: readonly Diagnostic[];
  constructor(diagnostics: readonly Diagnostic[] | Diagnostic) {
    const ds = Array.isArray(diagnostics) ? diagnostics : [diagnostics as Diagnostic];
    super(ds.map((d) => renderDiagnostic(d)).join('\n'));
    this.name = 'DiagnosticError';
    this.diagnostics = ds;
  }
}

export function hasErrors(ds: readonly Diagnostic[]): boolean {
  return ds.some((d) => d.severity === 'error');
}
