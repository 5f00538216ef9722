import { UsageError } from '../diagnostics.js';
import { BenchMachine, BenchResults, BenchRow, BenchmarkResult, readBenchResults } from './bench-results.js';

/**
 * Benchmark results as tables of text: the same cells for the console, the Markdown file and the
 * report page's Benchmarks tab, so that the three always agree.
 */

export interface BenchTable {
  readonly head: readonly string[];
  /** Right-aligned columns. */
  readonly numeric: readonly boolean[];
  readonly rows: readonly (readonly string[])[];
  /** How to read the table: what the median is of, which way the ratios go, what is constant. */
  readonly caption: string;
  /** Why a peer is missing, once per peer and reason. */
  readonly footnotes: readonly string[];
}

/** A benchmark's table, its title and notes, as the page shows them. */
export interface BenchSectionTable extends BenchTable {
  readonly name: string;
  readonly title: string;
  readonly notes: readonly string[];
  readonly seconds: number;
  readonly error?: string;
}

/** The Benchmarks tab of the HTML report: the results file's header and one table per benchmark. */
export interface BenchSection {
  /** The results file as given on the command line. */
  readonly file: string;
  readonly date: string;
  readonly commit: string | null;
  readonly command: string;
  /** "key: value" facts about the machine and the run. */
  readonly facts: readonly (readonly [string, string])[];
  readonly benchmarks: readonly BenchSectionTable[];
}

// ----------------------------------------------------------------------------------------------
// Numbers

/** Three or four significant figures; thousands grouped. */
export function formatNumber(x: number): string {
  const a = Math.abs(x);
  if (a === 0) return '0';
  if (a >= 100) return Math.round(x).toLocaleString('en-US');
  if (a >= 10) return x.toFixed(1);
  if (a >= 1) return x.toFixed(2);
  return x.toPrecision(3);
}

export function formatBytes(n: number): string {
  const a = Math.abs(n);
  if (a >= 2 ** 30) return `${(n / 2 ** 30).toFixed(2)} GiB`;
  if (a >= 2 ** 20) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  if (a >= 2 ** 10) return `${(n / 2 ** 10).toFixed(1)} KiB`;
  return `${Math.round(n)} bytes`;
}

/** A value in its unit: bytes scaled to KiB/MiB/GiB, anything else as a number. */
export function formatValue(x: number, unit: string): string {
  return unit === 'bytes' ? formatBytes(x) : formatNumber(x);
}

/** A value followed by its unit (bytes carry theirs already). */
export function withUnit(x: number, unit: string): string {
  return unit === 'bytes' ? formatBytes(x) : `${formatNumber(x)} ${unit}`;
}

export function formatRatio(r: number): string {
  return `${r >= 10 ? r.toFixed(1) : r >= 0.1 ? r.toFixed(2) : r.toPrecision(2)}×`;
}

// ----------------------------------------------------------------------------------------------
// Tables

function allSame<T>(xs: readonly T[]): boolean {
  return xs.every((x) => x === xs[0]);
}

function spread(r: BenchRow): string {
  if (r.computed) return 'computed';
  if (r.value.samples.length === 1) return '(one run)';
  return `${formatValue(r.value.min, r.unit)}–${formatValue(r.value.max, r.unit)}`;
}

/**
 * The table of one benchmark: a row per figure with its median and the range of the repeated
 * measurements, then each peer's median and the ratio of the subject to it. What would be the
 * same on every row (the subject, the metric, the unit, the number of runs, which way is better)
 * goes into the caption or the header instead; units that differ follow each median.
 */
export function benchTable(b: Pick<BenchmarkResult, 'rows'>): BenchTable {
  const rows = b.rows;
  const peers = [...new Set(rows.flatMap((r) => r.peers.map((p) => p.name)))];
  const measured = rows.filter((r) => !r.computed);
  const counts = measured.map((r) => r.value.samples.length);
  const cols = {
    subject: !allSame(rows.map((r) => r.subject)),
    metric: !allSame(rows.map((r) => r.metric)),
    unit: !allSame(rows.map((r) => r.unit)),
    runs: !allSame(counts),
    better: peers.length > 0 && !allSame(rows.filter((r) => r.peers.length).map((r) => r.higherIsBetter)),
  };
  const unit = rows[0]?.unit ?? '';
  const head = [
    'case',
    ...(cols.subject ? ['subject'] : []),
    ...(cols.metric ? ['metric'] : []),
    cols.unit ? 'median' : `median (${unit})`,
    'min–max',
    ...(cols.runs ? ['runs'] : []),
    ...(cols.better ? ['better'] : []),
    ...peers.flatMap((p) => [p, 'ratio']),
  ];
  const textColumns = 1 + +cols.subject + +cols.metric;
  const numeric = head.map((h, i) => i >= textColumns && h !== 'better');
  const footnotes: string[] = [];
  const body = rows.map((r) => [
    r.case,
    ...(cols.subject ? [r.subject] : []),
    ...(cols.metric ? [r.metric] : []),
    cols.unit ? withUnit(r.value.median, r.unit) : formatValue(r.value.median, r.unit),
    spread(r),
    ...(cols.runs ? [r.computed ? '' : String(r.value.samples.length)] : []),
    ...(cols.better ? [r.peers.length ? (r.higherIsBetter ? 'higher' : 'lower') : ''] : []),
    ...peers.flatMap((name) => {
      const p = r.peers.find((x) => x.name === name);
      if (!p) return ['', ''];
      if (p.unavailable !== undefined) {
        const note = `${name}: not available: ${p.unavailable}`;
        if (!footnotes.includes(note)) footnotes.push(note);
        return ['not available', ''];
      }
      return [cols.unit ? withUnit(p.value!.median, r.unit) : formatValue(p.value!.median, r.unit), p.ratio === undefined ? '' : formatRatio(p.ratio)];
    }),
  ]);
  const parts: string[] = [];
  if (!cols.subject && rows.length) parts.push(`subject: ${rows[0]!.subject}`);
  if (!cols.metric && rows.length) parts.push(`metric: ${rows[0]!.metric}`);
  if (!cols.runs && counts.length) parts.push(counts[0] === 1 ? 'one measurement each' : `median of ${counts[0]} repetitions and their range`);
  if (peers.length) {
    const subject = cols.subject ? 'subject' : rows[0]!.subject;
    const withPeers = rows.filter((r) => r.peers.length);
    const metrics = withPeers.map((r) => r.metric);
    const what = allSame(metrics) ? `${metrics[0]}: ` : '';
    const direction = cols.better ? '' : `; ${what}${withPeers[0]!.higherIsBetter ? 'higher' : 'lower'} is better`;
    parts.push(`ratio = ${subject} median / the peer's median, measured in the same run${direction}`);
  } else if (rows.length && allSame(rows.map((r) => r.higherIsBetter)) && measured.length) {
    parts.push(rows[0]!.higherIsBetter ? 'higher is better' : 'lower is better');
  }
  return { head, numeric, rows: body, caption: parts.join('; '), footnotes };
}

/** Fixed-width text for a terminal: two spaces between columns, numbers right-aligned. */
export function formatTextTable(t: Pick<BenchTable, 'head' | 'numeric' | 'rows'>): string[] {
  const all = [t.head, ...t.rows];
  const widths = t.head.map((_, c) => Math.max(...all.map((r) => r[c]!.length)));
  return all.map((r) => r.map((x, c) => (t.numeric[c] ? x.padStart(widths[c]!) : x.padEnd(widths[c]!))).join('  ').trimEnd());
}

/** "AMD EPYC, 2 cores, 23.5 GiB, Linux 6.1 x64" and the rest, as label/value pairs. */
export function machineFacts(r: Pick<BenchResults, 'machine' | 'repeat' | 'quick'>): [string, string][] {
  const m: BenchMachine = r.machine;
  const load = (l: readonly number[]) => l.map((x) => x.toFixed(2)).join(' ');
  return [
    ['CPU', `${m.cpu}, ${m.cores} core${m.cores === 1 ? '' : 's'}`],
    ['memory', formatBytes(m.memoryBytes)],
    ['OS', m.os],
    ['Node.js', m.node],
    ['onnxruntime-node', m.onnxruntime ?? 'not used'],
    ['PyTorch', m.torch ?? 'not used'],
    ['load average (1, 5, 15 min)', `${load(m.loadAtStart)} at the start, ${load(m.loadAtEnd)} at the end`],
    ['repetitions', `${r.repeat}${r.quick ? ' (--quick: shorter windows and fewer sizes)' : ''}`],
  ];
}

/**
 * The Benchmarks tab's data from a results file (`npm run bench` writes bench/results.json), read
 * and checked; `htmlFile` is the page it goes in (--bench only adds to an --html page). Problems
 * are command-line errors naming the file and what is wrong.
 */
export function benchSection(file: string, htmlFile: string | undefined): BenchSection {
  if (htmlFile === undefined) throw new UsageError('--bench adds a Benchmarks tab to the HTML report; give --html FILE as well');
  const r = readBenchResults(file);
  return {
    file,
    date: r.date,
    commit: r.commit,
    command: r.command.join(' '),
    facts: machineFacts(r),
    benchmarks: r.benchmarks.map((b) => ({ name: b.name, title: b.title, notes: b.notes, seconds: b.seconds, ...(b.error !== undefined ? { error: b.error } : {}), ...benchTable(b) })),
  };
}
