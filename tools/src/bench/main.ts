import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BenchmarkResult } from '../report/bench-results.js';
import { benchTable, formatTextTable } from '../report/bench-view.js';
import { benchCompile } from './compile.js';
import { benchDataloader } from './dataloader.js';
import { benchImport } from './import.js';
import { benchIr } from './ir.js';
import { benchMemory } from './memory.js';
import { benchPipeline } from './pipeline.js';
import { BenchContext, Benchmark, gitCommit, machine, onnxruntimeVersion, resultsDocument, writeResults } from './results.js';
import { benchRun } from './run.js';

/**
 * `npm run bench -- [names] [--out DIR] [--repeat N] [--quick]`: runs the named benchmarks (all
 * of them when none is named), prints a table for each and writes DIR/results.json and
 * DIR/results.md (DIR: bench/ at the repository root). Add a benchmark by adding it to BENCHMARKS.
 */
export const BENCHMARKS: Record<string, Benchmark> = {
  ir: benchIr,
  import: benchImport,
  run: benchRun,
  compile: benchCompile,
  memory: benchMemory,
  pipeline: benchPipeline,
  dataloader: benchDataloader,
};

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const DEFAULT_REPEAT = 5;
const QUICK_REPEAT = 3;

const USAGE = `usage: npm run bench -- [${Object.keys(BENCHMARKS).join('|')} ...] [--out DIR] [--repeat N] [--quick]
  --out DIR     where results.json and results.md go (default: bench/ at the repository root)
  --repeat N    repeated measurements per figure; the tables give their median and range (default ${DEFAULT_REPEAT}, ${QUICK_REPEAT} with --quick)
  --quick       a short run: shorter timing windows, fewer sizes, smaller models`;

interface Args {
  names: string[];
  out: string;
  repeat: number;
  repeatGiven: boolean;
  quick: boolean;
}

class ArgError extends Error {}

function parseArgs(argv: readonly string[]): Args | 'help' {
  const names: string[] = [];
  let out = path.join(ROOT, 'bench');
  let repeat: number | undefined;
  let quick = false;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const [flag, inline] = a.startsWith('--') && a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined];
    const value = () => {
      const v = inline ?? argv[++i];
      if (v === undefined || (inline === undefined && v.startsWith('-'))) throw new ArgError(`${flag} needs a value`);
      return v;
    };
    if (flag === '-h' || flag === '--help') return 'help';
    else if (flag === '--quick') quick = true;
    else if (flag === '--out') out = path.resolve(value());
    else if (flag === '--repeat') {
      const v = value();
      repeat = Number(v);
      if (!/^\d+$/.test(v) || repeat < 1) throw new ArgError(`--repeat ${v}: give a whole number of repetitions, 1 or more`);
    } else if (a.startsWith('-')) throw new ArgError(`unknown option ${a}`);
    else names.push(a);
  }
  const unknown = names.filter((n) => !(n in BENCHMARKS));
  if (unknown.length) throw new ArgError(`unknown benchmark${unknown.length > 1 ? 's' : ''} ${unknown.map((n) => `'${n}'`).join(', ')} (benchmarks: ${Object.keys(BENCHMARKS).join(', ')})`);
  return { names: names.length ? names : Object.keys(BENCHMARKS), out, repeat: repeat ?? (quick ? QUICK_REPEAT : DEFAULT_REPEAT), repeatGiven: repeat !== undefined, quick };
}

/** The output folder, made and tried before any benchmark runs (they can take minutes). */
function checkOutFolder(dir: string): void {
  fs.mkdirSync(dir, { recursive: true });
  const probe = path.join(dir, `.results.${process.pid}.probe`);
  fs.writeFileSync(probe, '');
  fs.rmSync(probe, { force: true });
}

function printBenchmark(r: BenchmarkResult): void {
  console.log(`${r.name}: ${r.title}`);
  const t = benchTable(r);
  if (t.rows.length) {
    for (const line of formatTextTable(t)) console.log(`  ${line}`);
    console.log(`  (${t.caption})`);
  }
  for (const f of t.footnotes) console.log(`  ${f}`);
  for (const n of r.notes) console.log(`  ${n}`);
  if (r.error !== undefined) console.log(`  FAILED: ${r.error}`);
  console.log(`${r.name}: done in ${r.seconds.toFixed(1)} s\n`);
}

async function main(argv: readonly string[]): Promise<number> {
  let args: Args | 'help';
  try {
    args = parseArgs(argv);
    if (args !== 'help') checkOutFolder(args.out);
  } catch (e) {
    console.error(`error: ${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  if (args === 'help') {
    console.log(USAGE);
    return 0;
  }
  const execArgv = process.execArgv;
  const date = new Date();
  const loadAtStart = os.loadavg();
  const command = ['node', ...execArgv, path.relative(process.cwd(), process.argv[1]!) || process.argv[1]!, ...argv];
  const ctx: BenchContext = { repeat: args.repeat, repeatGiven: args.repeatGiven, quick: args.quick, log: (line) => console.log(`  ${line}`) };
  console.log(`benchmarks ${args.names.join(', ')}: ${args.repeat} repetitions${args.quick ? ', quick' : ''}; load average ${loadAtStart.map((x) => x.toFixed(2)).join(' ')} on ${os.availableParallelism()} cores\n`);
  const results: BenchmarkResult[] = [];
  const versions: { onnxruntime?: string; torch?: string } = {};
  let failed = false;
  for (const name of args.names) {
    const t0 = performance.now();
    let r: BenchmarkResult;
    try {
      const out = await BENCHMARKS[name]!(ctx);
      if (out.versions?.onnxruntime) versions.onnxruntime = out.versions.onnxruntime;
      if (out.versions?.torch) versions.torch = out.versions.torch;
      r = { name, title: out.title, rows: out.rows, notes: out.notes ?? [], seconds: (performance.now() - t0) / 1000 };
    } catch (e) {
      failed = true;
      r = { name, title: `${name} benchmark`, rows: [], notes: [], seconds: (performance.now() - t0) / 1000, error: e instanceof Error ? e.message : String(e) };
      if (process.env['TILEGRAPH_DEBUG'] && e instanceof Error) console.error(e.stack);
    }
    results.push(r);
    printBenchmark(r);
  }
  versions.onnxruntime ??= args.names.some((n) => n === 'run' || n === 'import' || n === 'compile') ? onnxruntimeVersion() : undefined;
  const doc = resultsDocument({ date, commit: gitCommit(ROOT), command, repeat: args.repeat, quick: args.quick, machine: machine(loadAtStart, versions), benchmarks: results });
  const files = writeResults(args.out, doc);
  console.log(`results written to ${path.relative(process.cwd(), files.json) || files.json} and ${path.relative(process.cwd(), files.markdown) || files.markdown}`);
  return failed ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    console.error(e instanceof Error ? (e.stack ?? e.message) : String(e));
    process.exitCode = 1;
  },
);
