import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadExecutable } from '@tilegraph/runtime';
import { isDiagnosticError } from '../diagnostics.js';
import { EXIT_ERRORS, EXIT_INTERNAL, EXIT_OK, main } from '../cli.js';

/**
 * A fuzz worker (a child process): writes each case's file into its own folder, runs the command
 * in-process and answers with the exit code. The parent bounds its time and memory.
 */

export interface WorkerCase {
  /** File name (with the extension the command reads) and contents. */
  readonly file: string;
  readonly bytes: Uint8Array;
  /** The command line; FILE stands for the case's file. */
  readonly argv: readonly string[];
}

const dir = fs.mkdtempSync(path.join(process.env['TILEGRAPH_FUZZ_TMP'] ?? '/tmp', 'case-'));

/** Loads an exported executable without running it: only a diagnostic may refuse it. */
function loadExe(file: string): number {
  try {
    loadExecutable(file, { cacheDir: path.join(dir, 'cache') });
    return EXIT_OK;
  } catch (e) {
    if (isDiagnosticError(e)) return EXIT_ERRORS;
    process.stderr.write(`internal error: ${(e as Error).stack ?? String(e)}\n`);
    return EXIT_INTERNAL;
  }
}

// output is kept per case (the end of stderr goes back with the answer), never printed
let stderr = '';
const keep = (chunk: unknown): boolean => {
  if (stderr.length < 65536) stderr += typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8');
  return true;
};
process.stdout.write = (() => true) as typeof process.stdout.write;
process.stderr.write = keep as typeof process.stderr.write;

process.on('message', (m: { file: string; bytes: number[] | Uint8Array; argv: string[] }) => {
  void (async () => {
    stderr = '';
    const file = path.join(dir, m.file);
    fs.writeFileSync(file, Buffer.from(m.bytes as Uint8Array));
    const argv = m.argv.map((a) => (a === 'FILE' ? file : a));
    let code: number;
    if (argv[0] === 'load-executable') code = loadExe(file);
    else code = await main(argv);
    process.exitCode = 0;
    process.send!({ code, stderr: stderr.slice(-4000) });
  })();
});
