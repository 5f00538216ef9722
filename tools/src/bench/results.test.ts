import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BENCH_RESULTS_FORMAT, BenchResults, parseBenchResults, readBenchResults, summarize, verdict } from '../report/bench-results.js';
import { benchTable } from '../report/bench-view.js';
import { computedRow, measuredRow, renderMarkdown, resultsDocument, writeResults } from './results.js';

/** The benchmark results: statistics, rows and ratios, the two files and reading them back. No timings are asserted. */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

const MACHINE = { cpu: 'Test CPU', cores: 2, memoryBytes: 8 * 2 ** 30, os: 'Linux 6.1 x64', node: 'v20.0.0', onnxruntime: '1.30.0', loadAtStart: [0.5, 0.4, 0.3], loadAtEnd: [0.6, 0.5, 0.4] };

function sampleResults(): BenchResults {
  const run = [
    measuredRow({ benchmark: 'run', case: 'mlp inference', subject: 'emulated IPU', metric: 'throughput', unit: 'samples/s', higherIsBetter: true, samples: [1000, 1200, 1100], peers: [{ name: 'onnxruntime-node', samples: [4000, 4400, 4200] }] }),
    measuredRow({ benchmark: 'run', case: 'mlp training', subject: 'emulated IPU', metric: 'throughput', unit: 'samples/s', higherIsBetter: true, samples: [500, 700, 600], peers: [{ name: 'PyTorch', unavailable: 'PyTorch is not installed' }] }),
  ];
  const memory = [computedRow({ benchmark: 'memory', case: '12 layers, IPU 0', subject: 'memory plan', metric: 'always live', unit: 'bytes', higherIsBetter: false, value: 3 * 2 ** 20 })];
  return resultsDocument({
    date: new Date('2025-01-02T03:04:05Z'),
    commit: 'a'.repeat(40),
    command: ['node', 'tools/dist/bench/main.js', 'run', 'memory'],
    repeat: 3,
    quick: false,
    machine: MACHINE,
    benchmarks: [
      { name: 'run', title: 'throughput', rows: run, notes: ['one thread each'], seconds: 12.5 },
      { name: 'memory', title: 'the plan', rows: memory, notes: [], seconds: 1 },
    ],
  });
}

function tmpDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'tg-bench-results-'));
}

describe('summaries of repeated measurements', () => {
  it('gives the median, the range and the quartiles, and keeps the samples in their order', () => {
    expect(summarize([5, 1, 3])).toEqual({ median: 3, min: 1, max: 5, q1: 2, q3: 4, samples: [5, 1, 3] });
    const even = summarize([4, 1, 3, 2]);
    expect(even.median).toBe(2.5);
    expect(even.q1).toBe(1.75);
    expect(even.q3).toBe(3.25);
    expect(summarize([7])).toEqual({ median: 7, min: 7, max: 7, q1: 7, q3: 7, samples: [7] });
  });

  it('refuses no samples and samples that are not numbers', () => {
    expect(() => summarize([])).toThrow('no samples');
    expect(() => summarize([1, NaN])).toThrow('not a finite number');
  });
});

describe('rows and ratios', () => {
  it('divides the subject median by the peer median; which is better follows higherIsBetter', () => {
    const faster = measuredRow({ benchmark: 'b', case: 'c', subject: 's', metric: 'throughput', unit: 'samples/s', higherIsBetter: true, samples: [90, 100, 110], peers: [{ name: 'p', samples: [50, 40, 60] }] });
    expect(faster.value.median).toBe(100);
    expect(faster.peers[0]!.value!.median).toBe(50);
    expect(faster.peers[0]!.ratio).toBe(2);
    expect(verdict(faster, faster.peers[0]!)).toBe('better');
    // the same numbers as times: twice the peer's is worse
    const slower = measuredRow({ benchmark: 'b', case: 'c', subject: 's', metric: 'time', unit: 'ms', higherIsBetter: false, samples: [90, 100, 110], peers: [{ name: 'p', samples: [50, 40, 60] }] });
    expect(slower.peers[0]!.ratio).toBe(2);
    expect(verdict(slower, slower.peers[0]!)).toBe('worse');
    const same = measuredRow({ benchmark: 'b', case: 'c', subject: 's', metric: 'time', unit: 'ms', higherIsBetter: false, samples: [3], peers: [{ name: 'p', samples: [3] }] });
    expect(verdict(same, same.peers[0]!)).toBe('same');
  });

  it('keeps why a peer is missing, with no figure and no ratio', () => {
    const r = sampleResults().benchmarks[0]!.rows[1]!;
    expect(r.peers).toEqual([{ name: 'PyTorch', unavailable: 'PyTorch is not installed' }]);
    expect(verdict(r, r.peers[0]!)).toBeUndefined();
  });

  it('tables put constant columns in the caption, each peer with its ratio, missing peers in footnotes', () => {
    const t = benchTable(sampleResults().benchmarks[0]!);
    expect(t.head).toEqual(['case', 'median (samples/s)', 'min–max', 'onnxruntime-node', 'ratio', 'PyTorch', 'ratio']);
    expect(t.rows[0]).toEqual(['mlp inference', '1,100', '1,000–1,200', '4,200', '0.26×', '', '']);
    expect(t.rows[1]).toEqual(['mlp training', '600', '500–700', '', '', 'not available', '']);
    expect(t.caption).toContain('median of 3 repetitions');
    expect(t.caption).toContain('higher is better');
    expect(t.footnotes).toEqual(['PyTorch: not available: PyTorch is not installed']);
    const plan = benchTable(sampleResults().benchmarks[1]!);
    expect(plan.rows[0]).toEqual(['12 layers, IPU 0', '3.0 MiB', 'computed']);
  });
});

describe('the results files', () => {
  it('writes results.json and results.md, each by a rename: no temporary file is left', () => {
    const dir = path.join(tmpDir(), 'new', 'folder');
    const doc = sampleResults();
    const files = writeResults(dir, doc);
    expect(files).toEqual({ json: path.join(dir, 'results.json'), markdown: path.join(dir, 'results.md') });
    expect(fs.readdirSync(dir).sort()).toEqual(['results.json', 'results.md']);
    // written again over the old ones: still exactly the two files
    writeResults(dir, doc);
    expect(fs.readdirSync(dir).sort()).toEqual(['results.json', 'results.md']);
    expect(readBenchResults(files.json)).toEqual(doc);
    const md = fs.readFileSync(files.markdown, 'utf8');
    expect(md).toBe(renderMarkdown(doc));
    expect(md).toContain('Run on 2025-01-02T03:04:05.000Z at commit `aaaaaaaaaaaa`');
    expect(md).toContain('- CPU: Test CPU, 2 cores');
    expect(md).toContain('- load average (1, 5, 15 min): 0.50 0.40 0.30 at the start, 0.60 0.50 0.40 at the end');
    expect(md).toContain('| case | median (samples/s) | min–max | onnxruntime-node | ratio | PyTorch | ratio |');
    expect(md).toContain('| mlp inference | 1,100 | 1,000–1,200 | 4,200 | 0.26× |  |  |');
    expect(md).toContain('- PyTorch: not available: PyTorch is not installed');
  });

  it('escapes table cells in Markdown', () => {
    const doc = sampleResults();
    const row = measuredRow({ benchmark: 'x', case: 'a | b', subject: 's', metric: 'm', unit: 'ms', higherIsBetter: false, samples: [1] });
    const md = renderMarkdown({ ...doc, benchmarks: [{ name: 'x', title: 't', rows: [row], notes: [], seconds: 0 }] });
    expect(md).toContain('| a \\| b |');
  });
});

describe('reading results', () => {
  const file = 'bench/results.json';
  const valid = () => JSON.parse(JSON.stringify(sampleResults())) as Record<string, unknown>;
  const parse = (doc: unknown) => () => parseBenchResults(typeof doc === 'string' ? doc : JSON.stringify(doc), file);

  it('reads back what was written', () => {
    expect(parseBenchResults(JSON.stringify(sampleResults()), file)).toEqual(sampleResults());
  });

  it('says which file is not JSON', () => {
    expect(parse('{"format": ')).toThrow(/^bench\/results\.json is not JSON \(/);
  });

  it('says a foreign file is not benchmark results', () => {
    expect(parse({ name: 'some package' })).toThrow(`bench/results.json: not usable benchmark results: it has no "format": "${BENCH_RESULTS_FORMAT}"`);
    expect(parse([1, 2])).toThrow('the file is not a JSON object');
    expect(parse({ ...valid(), format: 'tilegraph-bench-results/9' })).toThrow('its format is tilegraph-bench-results/9; this tilegraph reads');
  });

  it('names the field that is wrong', () => {
    const doc = valid();
    const rows = ((doc['benchmarks'] as Record<string, unknown>[])[0]!['rows'] as Record<string, unknown>[]);
    (rows[1]!['value'] as Record<string, unknown>)['median'] = 'fast';
    expect(parse(doc)).toThrow('bench/results.json: not usable benchmark results: benchmarks[0].rows[1].value.median is not a number');
    const noMachine = valid();
    delete noMachine['machine'];
    expect(parse(noMachine)).toThrow('machine is not an object');
    const badDate = valid();
    badDate['date'] = 'yesterday';
    expect(parse(badDate)).toThrow('date "yesterday" is not a date');
    const unordered = valid();
    const first = ((unordered['benchmarks'] as Record<string, unknown>[])[0]!['rows'] as Record<string, unknown>[])[0]!;
    (first['value'] as Record<string, unknown>)['min'] = 5000;
    expect(parse(unordered)).toThrow('benchmarks[0].rows[0].value: min ≤ q1 ≤ median ≤ q3 ≤ max does not hold');
    const peerless = valid();
    const peer = (((peerless['benchmarks'] as Record<string, unknown>[])[0]!['rows'] as Record<string, unknown>[])[1]!['peers'] as Record<string, unknown>[])[0]!;
    delete peer['unavailable'];
    expect(parse(peerless)).toThrow('benchmarks[0].rows[1].peers[0] needs either a value or the reason it is unavailable');
  });

  it('says when the file is missing or a folder', () => {
    const dir = tmpDir();
    expect(() => readBenchResults(path.join(dir, 'results.json'))).toThrow(`no such file: ${path.join(dir, 'results.json')}`);
    expect(() => readBenchResults(dir)).toThrow(`${dir} is a folder, not benchmark results`);
  });
});

describe('npm run bench', () => {
  const main = path.join(ROOT, 'tools/dist/bench/main.js');
  const bench = (args: string[]) => spawnSync(process.execPath, ['--expose-gc', main, ...args], { encoding: 'utf8', timeout: 120_000 });

  it('writes both files for the benchmarks it ran (the IR benchmark, quick)', () => {
    const out = tmpDir();
    const r = bench(['ir', '--quick', '--repeat', '2', '--out', out]);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(fs.readdirSync(out).sort()).toEqual(['results.json', 'results.md']);
    const doc = readBenchResults(path.join(out, 'results.json'));
    expect(doc.repeat).toBe(2);
    expect(doc.quick).toBe(true);
    expect(doc.command.slice(-6)).toEqual(['ir', '--quick', '--repeat', '2', '--out', out]);
    expect(doc.benchmarks.map((b) => b.name)).toEqual(['ir']);
    const verify = doc.benchmarks[0]!.rows.find((x) => x.metric === 'verify')!;
    expect(verify.value.samples).toHaveLength(2);
    // the median of two is their mean, up to the last bit of the floating-point sum
    expect(verify.value.median).toBeCloseTo((verify.value.samples[0]! + verify.value.samples[1]!) / 2, 9);
    expect(fs.readFileSync(path.join(out, 'results.md'), 'utf8')).toContain('## ir');
    expect(r.stdout).toContain('results written to');
  });

  it('refuses unknown flags, benchmarks and repetition counts before running anything', () => {
    const out = tmpDir();
    for (const args of [['ir', '--repeat', '0', '--out', out], ['ir', '--repeat', 'many', '--out', out], ['ir', '--fast', '--out', out], ['nosuch', '--out', out], ['ir', '--out']]) {
      const r = bench(args);
      expect(r.status).toBe(2);
      expect(r.stderr).toMatch(/^error: /);
    }
    expect(fs.readdirSync(out)).toEqual([]);
  });
});
