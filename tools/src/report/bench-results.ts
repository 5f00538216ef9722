import * as fs from 'node:fs';
import { UsageError } from '../diagnostics.js';
import { checkInputFile } from '../files.js';

/**
 * The results file `npm run bench` writes (bench/results.json) and `tilegraph report --bench`
 * reads: its format, the statistics of repeated measurements, and a reader that checks every
 * field. It lives with the report because the report ships with the package and the benchmarks
 * do not.
 */

export const BENCH_RESULTS_FORMAT = 'tilegraph-bench-results/1';

/** Repeated measurements of one figure: every sample, in the order taken, and their statistics. */
export interface Summary {
  readonly median: number;
  readonly min: number;
  readonly max: number;
  /** First and third quartiles (linear interpolation between the closest ranks). */
  readonly q1: number;
  readonly q3: number;
  readonly samples: readonly number[];
}

/** A peer measured in the same run on the same case, or why there is none. */
export interface PeerResult {
  /** What ran, with its version when it has one: "onnxruntime-node 1.23.0". */
  readonly name: string;
  readonly value?: Summary;
  /** The subject's median over the peer's median (see `higherIsBetter` for which way is better). */
  readonly ratio?: number;
  /** Set instead of `value` when the peer could not run: the reason. */
  readonly unavailable?: string;
}

/** One figure of one benchmark. */
export interface BenchRow {
  readonly benchmark: string;
  /** The model or configuration: "mlp training". */
  readonly case: string;
  /** What was measured: "emulated IPU". */
  readonly subject: string;
  /** "throughput", "verify", "peak RSS over start". */
  readonly metric: string;
  readonly unit: string;
  readonly higherIsBetter: boolean;
  readonly value: Summary;
  readonly peers: readonly PeerResult[];
  /** A figure computed (a memory plan, a cost-model estimate), not timed: one value, no spread. */
  readonly computed?: boolean;
  readonly note?: string;
}

export interface BenchmarkResult {
  readonly name: string;
  /** One line saying what the benchmark does and how it measures. */
  readonly title: string;
  readonly rows: readonly BenchRow[];
  /** Remarks that belong beside the table: how to read it, limits of the comparison. */
  readonly notes: readonly string[];
  readonly seconds: number;
  /** Set when the benchmark failed or was skipped: what happened (its rows are then partial or empty). */
  readonly error?: string;
}

export interface BenchMachine {
  /** os.cpus()[0].model */
  readonly cpu: string;
  readonly cores: number;
  readonly memoryBytes: number;
  /** "Linux 6.1.0 x64" */
  readonly os: string;
  readonly node: string;
  readonly onnxruntime?: string;
  readonly torch?: string;
  /** 1-, 5- and 15-minute load averages when the run started and when it ended: other work on the machine. */
  readonly loadAtStart: readonly number[];
  readonly loadAtEnd: readonly number[];
}

export interface BenchResults {
  readonly format: typeof BENCH_RESULTS_FORMAT;
  /** When the run started, ISO 8601. */
  readonly date: string;
  /** `git rev-parse HEAD` of the checkout, null outside a repository. */
  readonly commit: string | null;
  /** The command line, as typed after `node`. */
  readonly command: readonly string[];
  readonly repeat: number;
  readonly quick: boolean;
  readonly machine: BenchMachine;
  readonly benchmarks: readonly BenchmarkResult[];
}

// ----------------------------------------------------------------------------------------------
// Statistics

/** The q-quantile (0 ≤ q ≤ 1) of sorted values, interpolating between the closest ranks. */
function quantile(sorted: readonly number[], q: number): number {
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  const hi = Math.ceil(at);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (at - lo);
}

/** The statistics of repeated measurements (at least one, all finite). */
export function summarize(samples: readonly number[]): Summary {
  if (samples.length === 0) throw new Error('summarize: no samples');
  if (!samples.every(Number.isFinite)) throw new Error(`summarize: a sample is not a finite number (${samples.join(', ')})`);
  const sorted = [...samples].sort((a, b) => a - b);
  return { median: quantile(sorted, 0.5), min: sorted[0]!, max: sorted[sorted.length - 1]!, q1: quantile(sorted, 0.25), q3: quantile(sorted, 0.75), samples: [...samples] };
}

/** A peer's entry: its summary and the subject's ratio to it (none when the peer's median is 0). */
export function comparePeer(name: string, subject: Summary, peer: Summary): PeerResult {
  return { name, value: peer, ...(peer.median !== 0 ? { ratio: subject.median / peer.median } : {}) };
}

/** Whether the subject did better than the peer, worse, or the same, given which way is better. */
export function verdict(row: Pick<BenchRow, 'higherIsBetter'>, peer: PeerResult): 'better' | 'worse' | 'same' | undefined {
  if (peer.ratio === undefined) return undefined;
  if (peer.ratio === 1) return 'same';
  return peer.ratio > 1 === row.higherIsBetter ? 'better' : 'worse';
}

// ----------------------------------------------------------------------------------------------
// Reading

/** A value of the wrong shape at `where` (a path like benchmarks[0].rows[2].value.median). */
class Malformed extends Error {}

type Json = Record<string, unknown>;

function object(v: unknown, where: string): Json {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Malformed(`${where} is not an object`);
  return v as Json;
}

function array(v: unknown, where: string): unknown[] {
  if (!Array.isArray(v)) throw new Malformed(`${where} is not a list`);
  return v;
}

function string(o: Json, key: string, where: string): string {
  const v = o[key];
  if (typeof v !== 'string') throw new Malformed(`${where}.${key} is ${v === undefined ? 'missing' : 'not a string'}`);
  return v;
}

function number(o: Json, key: string, where: string): number {
  const v = o[key];
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new Malformed(`${where}.${key} is ${v === undefined ? 'missing' : 'not a number'}`);
  return v;
}

function boolean(o: Json, key: string, where: string): boolean {
  const v = o[key];
  if (typeof v !== 'boolean') throw new Malformed(`${where}.${key} is ${v === undefined ? 'missing' : 'not true or false'}`);
  return v;
}

function optional<T>(o: Json, key: string, where: string, read: (o: Json, key: string, where: string) => T): T | undefined {
  return o[key] === undefined ? undefined : read(o, key, where);
}

function numbers(v: unknown, where: string): number[] {
  return array(v, where).map((x, i) => {
    if (typeof x !== 'number' || !Number.isFinite(x)) throw new Malformed(`${where}[${i}] is not a number`);
    return x;
  });
}

function readSummary(v: unknown, where: string): Summary {
  const o = object(v, where);
  const samples = numbers(o['samples'], `${where}.samples`);
  if (samples.length === 0) throw new Malformed(`${where}.samples is empty`);
  const s: Summary = { median: number(o, 'median', where), min: number(o, 'min', where), max: number(o, 'max', where), q1: number(o, 'q1', where), q3: number(o, 'q3', where), samples };
  if (!(s.min <= s.q1 && s.q1 <= s.median && s.median <= s.q3 && s.q3 <= s.max)) throw new Malformed(`${where}: min ≤ q1 ≤ median ≤ q3 ≤ max does not hold`);
  return s;
}

function readPeer(v: unknown, where: string): PeerResult {
  const o = object(v, where);
  const name = string(o, 'name', where);
  const unavailable = optional(o, 'unavailable', where, string);
  const value = o['value'] === undefined ? undefined : readSummary(o['value'], `${where}.value`);
  const ratio = optional(o, 'ratio', where, number);
  if ((value === undefined) === (unavailable === undefined)) throw new Malformed(`${where} needs either a value or the reason it is unavailable`);
  return { name, ...(value ? { value } : {}), ...(ratio !== undefined ? { ratio } : {}), ...(unavailable !== undefined ? { unavailable } : {}) };
}

function readRow(v: unknown, where: string): BenchRow {
  const o = object(v, where);
  const computed = optional(o, 'computed', where, boolean);
  const note = optional(o, 'note', where, string);
  return {
    benchmark: string(o, 'benchmark', where),
    case: string(o, 'case', where),
    subject: string(o, 'subject', where),
    metric: string(o, 'metric', where),
    unit: string(o, 'unit', where),
    higherIsBetter: boolean(o, 'higherIsBetter', where),
    value: readSummary(o['value'], `${where}.value`),
    peers: array(o['peers'], `${where}.peers`).map((p, i) => readPeer(p, `${where}.peers[${i}]`)),
    ...(computed !== undefined ? { computed } : {}),
    ...(note !== undefined ? { note } : {}),
  };
}

function readBenchmark(v: unknown, where: string): BenchmarkResult {
  const o = object(v, where);
  const error = optional(o, 'error', where, string);
  return {
    name: string(o, 'name', where),
    title: string(o, 'title', where),
    rows: array(o['rows'], `${where}.rows`).map((r, i) => readRow(r, `${where}.rows[${i}]`)),
    notes: array(o['notes'], `${where}.notes`).map((n, i) => {
      if (typeof n !== 'string') throw new Malformed(`${where}.notes[${i}] is not a string`);
      return n;
    }),
    seconds: number(o, 'seconds', where),
    ...(error !== undefined ? { error } : {}),
  };
}

function readMachine(v: unknown, where: string): BenchMachine {
  const o = object(v, where);
  const onnxruntime = optional(o, 'onnxruntime', where, string);
  const torch = optional(o, 'torch', where, string);
  return {
    cpu: string(o, 'cpu', where),
    cores: number(o, 'cores', where),
    memoryBytes: number(o, 'memoryBytes', where),
    os: string(o, 'os', where),
    node: string(o, 'node', where),
    ...(onnxruntime !== undefined ? { onnxruntime } : {}),
    ...(torch !== undefined ? { torch } : {}),
    loadAtStart: numbers(o['loadAtStart'], `${where}.loadAtStart`),
    loadAtEnd: numbers(o['loadAtEnd'], `${where}.loadAtEnd`),
  };
}

/** Checks a parsed results document field by field; `file` names it in the messages. */
export function parseBenchResults(text: string, file: string): BenchResults {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new UsageError(`${file} is not JSON (${(e as Error).message}); give the results.json that \`npm run bench\` writes`);
  }
  const fail = (why: string) => new UsageError(`${file}: not usable benchmark results: ${why}`);
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw fail('the file is not a JSON object');
  const format = (doc as Json)['format'];
  if (format !== BENCH_RESULTS_FORMAT) {
    throw fail(
      typeof format === 'string' && format.startsWith('tilegraph-bench-results/')
        ? `its format is ${format}; this tilegraph reads ${BENCH_RESULTS_FORMAT} (run \`npm run bench\` again)`
        : `it has no "format": "${BENCH_RESULTS_FORMAT}" (is it the results.json that \`npm run bench\` writes?)`,
    );
  }
  try {
    const o = doc as Json;
    const commit = o['commit'];
    if (commit !== null && typeof commit !== 'string') throw new Malformed('commit is neither a string nor null');
    const date = string(o, 'date', 'the document');
    if (Number.isNaN(Date.parse(date))) throw new Malformed(`date ${JSON.stringify(date)} is not a date`);
    return {
      format: BENCH_RESULTS_FORMAT,
      date,
      commit,
      command: array(o['command'], 'command').map((a, i) => {
        if (typeof a !== 'string') throw new Malformed(`command[${i}] is not a string`);
        return a;
      }),
      repeat: number(o, 'repeat', 'the document'),
      quick: boolean(o, 'quick', 'the document'),
      machine: readMachine(o['machine'], 'machine'),
      benchmarks: array(o['benchmarks'], 'benchmarks').map((b, i) => readBenchmark(b, `benchmarks[${i}]`)),
    };
  } catch (e) {
    if (e instanceof Malformed) throw fail(e.message.replace(/^the document\./, ''));
    throw e;
  }
}

/** Reads and checks a results file (a missing or unreadable file is a command-line error, too). */
export function readBenchResults(file: string): BenchResults {
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch {
    throw new UsageError(`no such file: ${file} (the benchmark results; \`npm run bench\` writes bench/results.json)`);
  }
  if (st.isDirectory()) throw new UsageError(`${file} is a folder, not benchmark results (give the results.json in it)`);
  // a FIFO or a device would block or never end
  if (!st.isFile()) throw new UsageError(`${file} is not a regular file (a FIFO, device or socket); give the benchmark results as a file`);
  checkInputFile(file, 'benchmark results');
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`cannot read ${file}: ${(e as Error).message}`);
  }
  return parseBenchResults(text, file);
}
