import { Diagnostic, formatFrame, selectFrame } from '@tilegraph/ir';

/**
 * Machine-readable output (`--json`): one JSON document on stdout per command, JSON Lines of
 * events for `train`. Human-readable diagnostics still go to stderr; the same diagnostics are also
 * part of the JSON (a document's `warnings`, an `error` document or event when the command fails),
 * so a program reading stdout alone learns everything.
 */

export interface DiagnosticJson {
  severity: string;
  message: string;
  /** `file:line:col` of the frame a user should see (sourceLocationExcludes applied). */
  location?: string;
  /** Every frame, innermost first: the op's line, then the calls that led to it. */
  frames?: string[];
  notes?: string[];
}

export function diagnosticJson(d: Diagnostic, excludes: readonly string[] = []): DiagnosticJson {
  const frame = d.loc ? selectFrame(d.loc, excludes) : undefined;
  return {
    severity: d.severity,
    message: d.message,
    ...(frame ? { location: formatFrame(frame) } : {}),
    ...(d.loc && d.loc.frames.length > 1 ? { frames: d.loc.frames.map(formatFrame) } : {}),
    ...(d.notes?.length ? { notes: [...d.notes] } : {}),
  };
}

/** NaN and infinities, which JSON cannot hold, as strings (as the outputs of `run --json` are). */
export function jsonNumber(x: number): number | string {
  return Number.isFinite(x) ? x : String(x);
}

let mode: 'document' | 'lines' | undefined;
const warnings: DiagnosticJson[] = [];
const errors: DiagnosticJson[] = [];
let documentWritten = false;

/** Chosen by main() from the command line, before the command runs. */
export function setJsonMode(m: 'document' | 'lines' | undefined): void {
  mode = m;
  warnings.length = 0;
  errors.length = 0;
  documentWritten = false;
}

export function jsonMode(): 'document' | 'lines' | undefined {
  return mode;
}

/** Called for every diagnostic a command reports: kept for the document, or sent as an event. */
export function noteReported(d: Diagnostic, excludes: readonly string[]): void {
  if (!mode) return;
  const j = diagnosticJson(d, excludes);
  if (mode === 'lines') emitEvent({ event: d.severity === 'error' ? 'error' : 'warning', ...j });
  else (d.severity === 'error' ? errors : warnings).push(j);
}

/** The errors reported so far, for the error document of a failed command. */
export function reportedErrors(): DiagnosticJson[] {
  return [...errors];
}

/** The warnings reported so far, for the command's JSON document. */
export function reportedWarnings(): DiagnosticJson[] {
  return [...warnings];
}

/** One JSON Lines event (train --json). */
export function emitEvent(e: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify(e) + '\n');
}

/** The command's one JSON document, with the warnings it reported. */
export function emitDocument(doc: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ ...doc, warnings: reportedWarnings() }) + '\n');
  documentWritten = true;
}

/** Whether the command wrote its document already (a failure after it adds no second one). */
export function documentEmitted(): boolean {
  return documentWritten;
}
