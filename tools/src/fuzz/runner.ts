import { ChildProcess, fork } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import fc from 'fast-check';
import { Seed } from './seeds.js';
import { Mutation, applyMutations, mutations } from './mutate.js';

/**
 * Runs mutated inputs through the command line, each case in a worker process under a time and
 * memory bound. A case passes when the command ends with exit code 0, 1 or 2 (a result or a
 * diagnostic); an internal error (70), a crash, a hang or runaway memory is a failure.
 */

export interface FuzzCase {
  readonly index: number;
  readonly seed: Seed;
  readonly argv: readonly string[];
  readonly mutations: readonly Mutation[];
  readonly bytes: Uint8Array;
}

export type Outcome = 'ok' | 'internal-error' | 'crash' | 'hang' | 'memory';

export interface FuzzResult {
  readonly case: FuzzCase;
  readonly outcome: Outcome;
  readonly code?: number;
  readonly detail: string;
  readonly ms: number;
}

export interface FuzzOptions {
  readonly seed: number;
  readonly runs: number;
  /** Worker processes side by side. */
  readonly jobs?: number;
  /** Longest a case may take. */
  readonly timeoutMs?: number;
  /** Resident memory a worker may reach. */
  readonly maxRssMb?: number;
  readonly onResult?: (r: FuzzResult, done: number, total: number) => void;
}

/** The cases of a run: deterministic for a seed. */
export function fuzzCases(seeds: readonly Seed[], seed: number, runs: number): FuzzCase[] {
  const arb = fc.nat({ max: seeds.length - 1 }).chain((s) =>
    fc.tuple(fc.constant(s), fc.nat({ max: seeds[s]!.commands.length - 1 }), mutations(seeds[s]!.bytes.length)),
  );
  return fc.sample(arb, { seed, numRuns: runs }).map(([s, c, ms], index) => {
    const sd = seeds[s]!;
    return { index, seed: sd, argv: sd.commands[c]!, mutations: ms, bytes: applyMutations(sd.bytes, ms) };
  });
}

function rssMb(pid: number): number {
  try {
    const pages = Number(fs.readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]);
    return (pages * 4096) / 2 ** 20;
  } catch {
    return 0;
  }
}

export async function runFuzzCases(cases: readonly FuzzCase[], opts: FuzzOptions): Promise<FuzzResult[]> {
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const maxRssMb = opts.maxRssMb ?? 3072;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-fuzz-'));
  const workerFile = new URL('./worker.js', import.meta.url);
  const results: FuzzResult[] = new Array(cases.length);
  let next = 0;
  let done = 0;
  const spawn = (): ChildProcess =>
    fork(workerFile, [], {
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
      execArgv: ['--max-old-space-size=2048', '--no-warnings'],
      env: { ...process.env, TILEGRAPH_FUZZ_TMP: tmp, XDG_CACHE_HOME: path.join(tmp, 'cache'), TILEGRAPH_DEBUG: '1' },
    });
  const lane = async (): Promise<void> => {
    let w: ChildProcess | undefined;
    while (next < cases.length) {
      const c = cases[next++]!;
      const worker = (w ??= spawn());
      let stderr = '';
      const onErr = (d: Buffer) => {
        stderr = (stderr + d.toString('utf8')).slice(-4000);
      };
      worker.stderr!.on('data', onErr);
      const started = Date.now();
      const r = await new Promise<FuzzResult>((resolve) => {
        const finish = (outcome: Outcome, detail: string, code?: number) => {
          clearTimeout(timer);
          clearInterval(watch);
          worker.off('message', onMessage);
          worker.off('exit', onExit);
          worker.stderr!.off('data', onErr);
          if (outcome !== 'ok' && outcome !== 'internal-error') {
            worker.kill('SIGKILL');
            w = undefined;
          }
          resolve({ case: c, outcome, detail, ms: Date.now() - started, ...(code !== undefined ? { code } : {}) });
        };
        const onMessage = (m: { code: number; stderr: string }) => {
          if (m.code === 0 || m.code === 1 || m.code === 2) finish('ok', '', m.code);
          else finish('internal-error', m.stderr, m.code);
        };
        const onExit = (code: number | null, signal: string | null) => finish('crash', `worker ended (${signal ?? `exit code ${code}`})\n${stderr}`);
        const timer = setTimeout(() => finish('hang', `no answer within ${timeoutMs / 1000} s`), timeoutMs);
        const watch = setInterval(() => {
          const mb = rssMb(worker.pid!);
          if (mb > maxRssMb) finish('memory', `resident memory reached ${mb.toFixed(0)} MB (limit ${maxRssMb} MB)`);
        }, 100);
        worker.on('message', onMessage);
        worker.on('exit', onExit);
        worker.send({ file: c.seed.file, bytes: c.bytes, argv: c.argv });
      });
      results[c.index] = r;
      opts.onResult?.(r, ++done, cases.length);
    }
    w?.kill('SIGKILL');
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, opts.jobs ?? 2) }, () => lane()));
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return results;
}

/** Writes a failing case (its file and how to reproduce it) into `dir`. */
export function saveFailure(dir: string, r: FuzzResult): string {
  fs.mkdirSync(dir, { recursive: true });
  const base = path.join(dir, `case-${r.case.index}-${r.outcome}`);
  const file = `${base}${path.extname(r.case.seed.file)}`;
  fs.writeFileSync(file, r.case.bytes);
  const argv = r.case.argv.map((a) => (a === 'FILE' ? file : a));
  fs.writeFileSync(
    `${base}.txt`,
    [`seed file: ${r.case.seed.name}`, `outcome: ${r.outcome}${r.code !== undefined ? ` (exit code ${r.code})` : ''}`, `reproduce: tilegraph ${argv.join(' ')}`, `mutations: ${JSON.stringify(r.case.mutations)}`, '', r.detail].join('\n'),
  );
  return file;
}
