#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { OptionsError } from '@tilegraph/frontend';
import { Diagnostic, printable } from '@tilegraph/ir';
import { logLevel } from '@tilegraph/runtime';
import { colourFor, paint } from './colour.js';
import { diagnosticJson, documentEmitted, emitDocument, emitEvent, jsonMode, reportedErrors, setJsonMode } from './json.js';
import { UsageError, isDiagnosticError, stderrReporter } from './diagnostics.js';
import { registerIr } from './commands/ir.js';
import { registerRun } from './commands/run.js';
import { registerTrain } from './commands/train.js';
import { registerImport } from './commands/import.js';
import { registerCompile } from './commands/compile.js';
import { registerReport } from './commands/report.js';
import { registerCache } from './commands/cache.js';
import { checkCacheSizeVariable } from './cachedir.js';

/** Exit codes: 0 success, 1 the input has errors (diagnostics printed), 2 bad usage, 70 internal error. */
export const EXIT_OK = 0;
export const EXIT_ERRORS = 1;
export const EXIT_USAGE = 2;
export const EXIT_INTERNAL = 70;

export function buildProgram(): Command {
  const program = new Command();
  program
    .name('tilegraph')
    .description('Compile machine-learning models to Graphcore IPUs (or their host emulation) and run them.')
    .version('0.1.0')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  registerIr(program);
  registerImport(program);
  registerRun(program);
  registerTrain(program);
  registerCompile(program);
  registerReport(program);
  registerCache(program);
  return program;
}

/** `--json` anywhere on the command line: one document, or JSON Lines of events for train. */
function jsonModeOf(argv: readonly string[]): 'document' | 'lines' | undefined {
  const end = argv.indexOf('--');
  const flags = end < 0 ? argv : argv.slice(0, end);
  if (!flags.includes('--json')) return undefined;
  return flags.find((a) => !a.startsWith('-')) === 'train' ? 'lines' : 'document';
}

/** A bad TILEGRAPH_LOG_LEVEL is bad usage (exit 2), said before the command runs rather than ignored. */
function checkLogLevelVariable(): void {
  try {
    logLevel();
  } catch (e) {
    if (isDiagnosticError(e)) throw new UsageError(e.diagnostics.map((d) => [d.message, ...(d.notes ?? [])].join('; ')).join('\n'));
    throw e;
  }
}

export async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  setJsonMode(jsonModeOf(argv));
  const colour = colourFor(process.stderr);
  // a failure the user can act on: said on stderr, and as JSON on stdout when --json asks for it
  const fail = (code: number, message: string): number => {
    process.stderr.write(`${paint('tilegraph:', ['bold', 'red'], colour)} ${printable(message)}\n`);
    failed(code, [{ severity: 'error', message }]);
    return code;
  };
  try {
    checkLogLevelVariable();
    checkCacheSizeVariable();
    await program.parseAsync(argv as string[], { from: 'user' });
    return EXIT_OK;
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.code === 'commander.helpDisplayed' || e.code === 'commander.version' || e.code === 'commander.help') return EXIT_OK;
      failed(EXIT_USAGE, [{ severity: 'error', message: e.message.replace(/^error: /, '') }]);
      return EXIT_USAGE;
    }
    if (isDiagnosticError(e)) {
      const excludes = (e as { excludes?: string[] }).excludes ?? [];
      stderrReporter(excludes).report(e.diagnostics);
      failed(EXIT_ERRORS, [], true);
      return EXIT_ERRORS;
    }
    if (e instanceof UsageError) return fail(EXIT_USAGE, e.message);
    // an impossible option value (a flag or an options-file line): the user's input, not a crash
    if (e instanceof OptionsError) return fail(EXIT_USAGE, e.message);
    const err = e instanceof Error ? e : new Error(String(e));
    fail(EXIT_INTERNAL, `internal error: ${err.message}`);
    if (process.env['TILEGRAPH_DEBUG']) process.stderr.write(`${err.stack}\n`);
    else process.stderr.write('  (set TILEGRAPH_DEBUG=1 for a stack trace, and please report this)\n');
    return EXIT_INTERNAL;
  }
}

/**
 * With --json, a failed command still ends its stdout with JSON: an error document (or, for
 * train, an `end` event) holding the exit code and the diagnostics. Diagnostics already reported
 * through the reporter were sent as events (lines) or collected (document).
 */
function failed(code: number, diagnostics: readonly Diagnostic[], reported = false): void {
  const mode = jsonMode();
  if (!mode || documentEmitted()) return;
  const errors = reported ? reportedErrors() : diagnostics.map((d) => diagnosticJson(d));
  if (mode === 'lines') {
    if (!reported) for (const d of errors) emitEvent({ event: 'error', ...d });
    emitEvent({ event: 'end', ok: false, exit_code: code });
  } else {
    emitDocument({ ok: false, exit_code: code, errors });
  }
}

/** Runs the command line and sets the exit code (used by bin/tilegraph.js and `node dist/cli.js`). */
export async function runCli(argv: readonly string[]): Promise<void> {
  // output piped into a program that stops reading (| head) ends the command quietly
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(0);
    throw e;
  });
  // names come from model files: what the commands print never drives the terminal
  const write = process.stdout.write.bind(process.stdout) as (chunk: unknown, ...rest: unknown[]) => boolean;
  process.stdout.write = ((chunk: unknown, ...rest: unknown[]) => write(typeof chunk === 'string' ? printable(chunk) : chunk, ...rest)) as typeof process.stdout.write;
  try {
    process.exitCode = await main(argv);
  } catch (e) {
    process.stderr.write(`tilegraph: internal error: ${String(e)}\n`);
    process.exitCode = EXIT_INTERNAL;
  }
}

const isEntry = process.argv[1] !== undefined && import.meta.url.endsWith('/dist/cli.js') && process.argv[1].replace(/\\/g, '/').endsWith('/dist/cli.js');
if (isEntry) void runCli(process.argv.slice(2));
