import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { writeFileAtomic } from '@tilegraph/runtime';
import { BENCH_RESULTS_FORMAT, BenchMachine, BenchResults, BenchRow, BenchmarkResult, PeerResult, Summary, comparePeer, summarize } from '../report/bench-results.js';
import { benchTable, machineFacts } from '../report/bench-view.js';

/**
 * The benchmarks' common ground: what each is given (BenchContext) and returns (BenchOutput), the
 * rows they build, the machine they ran on, and the two files a run writes — results.json and
 * results.md — each written to a temporary file and renamed into place.
 */

export interface BenchContext {
  /** Repeated measurements per figure (--repeat). */
  readonly repeat: number;
  /** Whether --repeat was given (a benchmark with slow figures may default to fewer). */
  readonly repeatGiven?: boolean;
  /** --quick: shorter windows, fewer sizes. */
  readonly quick: boolean;
  /** Prints a progress line (results are printed by main as tables). */
  log(line: string): void;
}

export interface BenchOutput {
  readonly title: string;
  readonly rows: readonly BenchRow[];
  readonly notes?: readonly string[];
  /** Versions of the peers the benchmark ran, for the machine header. */
  readonly versions?: { readonly onnxruntime?: string; readonly torch?: string };
}

export type Benchmark = (ctx: BenchContext) => Promise<BenchOutput>;

/** A peer of a row: measured (its samples) or not available (why). */
export type PeerInput = { readonly name: string; readonly samples: readonly number[] } | { readonly name: string; readonly unavailable: string };

/** A row from raw samples: the medians, spreads and ratios are computed here, nowhere else. */
export function measuredRow(r: { benchmark: string; case: string; subject: string; metric: string; unit: string; higherIsBetter: boolean; samples: readonly number[]; peers?: readonly PeerInput[]; note?: string }): BenchRow {
  const value = summarize(r.samples);
  const peers: PeerResult[] = (r.peers ?? []).map((p) => ('unavailable' in p ? { name: p.name, unavailable: p.unavailable } : comparePeer(p.name, value, summarize(p.samples))));
  return { benchmark: r.benchmark, case: r.case, subject: r.subject, metric: r.metric, unit: r.unit, higherIsBetter: r.higherIsBetter, value, peers, ...(r.note !== undefined ? { note: r.note } : {}) };
}

/** A figure computed rather than timed (a memory plan, a cost-model estimate): one value. */
export function computedRow(r: { benchmark: string; case: string; subject: string; metric: string; unit: string; higherIsBetter: boolean; value: number; note?: string }): BenchRow {
  const value: Summary = summarize([r.value]);
  return { benchmark: r.benchmark, case: r.case, subject: r.subject, metric: r.metric, unit: r.unit, higherIsBetter: r.higherIsBetter, value, peers: [], computed: true, ...(r.note !== undefined ? { note: r.note } : {}) };
}

// ----------------------------------------------------------------------------------------------
// The machine

export function onnxruntimeVersion(): string | undefined {
  try {
    const require = createRequire(import.meta.url);
    return (require('onnxruntime-node/package.json') as { version: string }).version;
  } catch {
    return undefined;
  }
}

/** The checkout's commit, or null when `dir` is not in a git repository (or git is missing). */
export function gitCommit(dir: string): string | null {
  const r = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: dir, encoding: 'utf8', timeout: 10_000 });
  const out = r.status === 0 ? r.stdout.trim() : '';
  return /^[0-9a-f]{40,64}$/.test(out) ? out : null;
}

export function machine(loadAtStart: readonly number[], versions: { onnxruntime?: string | undefined; torch?: string | undefined }): BenchMachine {
  const cpus = os.cpus();
  return {
    cpu: cpus[0]?.model.trim() || 'unknown',
    cores: os.availableParallelism(),
    memoryBytes: os.totalmem(),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
    node: process.version,
    ...(versions.onnxruntime ? { onnxruntime: versions.onnxruntime } : {}),
    ...(versions.torch ? { torch: versions.torch } : {}),
    loadAtStart: [...loadAtStart],
    loadAtEnd: os.loadavg(),
  };
}

// ----------------------------------------------------------------------------------------------
// The files

const escapeCell = (s: string) => s.replace(/\\/g, '\\\\').replace(/\|/g, '\\|').replace(/\n/g, ' ');

function markdownTable(head: readonly string[], numeric: readonly boolean[], rows: readonly (readonly string[])[]): string[] {
  return [`| ${head.map(escapeCell).join(' | ')} |`, `|${numeric.map((n) => (n ? ' ---: ' : ' --- ')).join('|')}|`, ...rows.map((r) => `| ${r.map(escapeCell).join(' | ')} |`)];
}

/** results.md: the machine and date, then a table per benchmark with its notes. */
export function renderMarkdown(r: BenchResults): string {
  const lines = [
    '# tilegraph benchmarks',
    '',
    `Run on ${r.date}${r.commit ? ` at commit \`${r.commit.slice(0, 12)}\`` : ''} with \`${r.command.join(' ')}\`.`,
    '',
    ...machineFacts(r).map(([k, v]) => `- ${k}: ${v}`),
  ];
  for (const b of r.benchmarks) {
    const t = benchTable(b);
    lines.push('', `## ${b.name}`, '', b.title, '');
    if (b.error !== undefined) lines.push(`**Failed:** ${b.error}`, '');
    if (t.rows.length) lines.push(...markdownTable(t.head, t.numeric, t.rows), '', `${t.caption}.`);
    for (const f of t.footnotes) lines.push('', `- ${f}`);
    if (b.notes.length) lines.push('', ...b.notes.map((n) => `- ${n}`));
  }
  return `${lines.join('\n')}\n`;
}

/** Writes results.json and results.md into `dir` (made if missing), each atomically. */
export function writeResults(dir: string, r: BenchResults): { json: string; markdown: string } {
  fs.mkdirSync(dir, { recursive: true });
  const json = path.join(dir, 'results.json');
  const markdown = path.join(dir, 'results.md');
  writeFileAtomic(json, `${JSON.stringify(r, null, 2)}\n`);
  writeFileAtomic(markdown, renderMarkdown(r));
  return { json, markdown };
}

/** The results document of a run. */
export function resultsDocument(r: { date: Date; commit: string | null; command: readonly string[]; repeat: number; quick: boolean; machine: BenchMachine; benchmarks: readonly BenchmarkResult[] }): BenchResults {
  return { format: BENCH_RESULTS_FORMAT, date: r.date.toISOString(), commit: r.commit, command: [...r.command], repeat: r.repeat, quick: r.quick, machine: r.machine, benchmarks: [...r.benchmarks] };
}
