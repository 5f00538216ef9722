import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { generatePoplar } from '@tilegraph/codegen-poplar';
import { htmlReportData } from '../commands/report.js';
import { buildStep } from '../commands/step.js';
import { UsageError } from '../diagnostics.js';
import { computedRow, measuredRow, resultsDocument, writeResults } from '../bench/results.js';
import { benchSection } from './bench-view.js';
import { renderReportHtml } from './html.js';

/** The Benchmarks tab of the HTML report (report --bench): the results' tables, every text escaped. */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const HOSTILE = '<img src=x onerror=alert(1)>';
const CLOSER = '</script><script>alert(2)</script>';

function resultsFile(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-bench-html-'));
  const rows = [
    measuredRow({ benchmark: 'run', case: `mlp${HOSTILE} training`, subject: 'emulated IPU', metric: 'throughput', unit: 'samples/s', higherIsBetter: true, samples: [9000, 10000, 11000], peers: [{ name: 'PyTorch', samples: [40000, 50000, 60000] }] }),
    measuredRow({ benchmark: 'run', case: 'cnn training', subject: 'emulated IPU', metric: 'throughput', unit: 'samples/s', higherIsBetter: true, samples: [2000, 2500, 3000], peers: [{ name: 'PyTorch', unavailable: `no torch ${CLOSER}` }] }),
  ];
  const plan = [computedRow({ benchmark: 'memory', case: '12 layers, IPU 0', subject: 'memory plan', metric: 'always live', unit: 'bytes', higherIsBetter: false, value: 336 * 2 ** 20 })];
  writeResults(
    dir,
    resultsDocument({
      date: new Date('2025-03-04T05:06:07Z'),
      commit: null,
      command: ['node', 'tools/dist/bench/main.js', `run${HOSTILE}`],
      repeat: 3,
      quick: false,
      machine: { cpu: `CPU ${HOSTILE}`, cores: 2, memoryBytes: 2 ** 33, os: 'Linux', node: 'v20.1.0', onnxruntime: '1.30.0', torch: '1.13.0a0', loadAtStart: [1.5, 1, 0.5], loadAtEnd: [1, 1, 1] },
      benchmarks: [
        { name: 'run', title: `throughput ${CLOSER}`, rows, notes: [`note ${HOSTILE}`], seconds: 30 },
        { name: 'memory', title: 'plan', rows: plan, notes: [], seconds: 2 },
        { name: 'pipeline', title: 'pipeline', rows: [], notes: [], seconds: 1, error: `failed ${HOSTILE}` },
      ],
    }),
  );
  return path.join(dir, 'results.json');
}

describe('the Benchmarks tab', () => {
  const step = buildStep(path.join(ROOT, 'examples/mlp.tg'), { pipeline: 'training', optimizer: 'sgd' });
  const data = htmlReportData('examples/mlp.tg', step, generatePoplar(step.module, { allowOutOfMemory: true }), { loadAndPasses: 1, generate: 1 });
  const file = resultsFile();
  const bench = benchSection(file, 'out.html');
  const html = renderReportHtml({ ...data, bench });
  const tab = /<section id="tab-bench" class="tab" hidden>([\s\S]*?)<\/section>/.exec(html)?.[1] ?? '';

  it('is a fifth tab, only when results are given', () => {
    expect(html).toContain('<button role="tab" data-tab="bench">Benchmarks</button>');
    expect(tab).not.toBe('');
    const plain = renderReportHtml(data);
    expect(plain).not.toContain('data-tab="bench"');
    expect(plain).not.toContain('<section id="tab-bench"');
  });

  it('holds the machine, the date and a table per benchmark with medians, ranges and ratios', () => {
    expect(tab).toContain('<tr><th>date</th><td>2025-03-04T05:06:07.000Z</td></tr>');
    expect(tab).toContain('<tr><th>commit</th><td>not a git checkout</td></tr>');
    expect(tab).toContain('<tr><th>CPU</th><td>CPU &lt;img src=x onerror=alert(1)&gt;, 2 cores</td></tr>');
    expect(tab).toContain('<th>PyTorch</th><td>1.13.0a0</td>');
    expect(tab).toContain('<h2>run</h2>');
    expect(tab).toContain('<th>case</th><th class="n">median (samples/s)</th><th class="n">min–max</th><th class="n">PyTorch</th><th class="n">ratio</th>');
    expect(tab).toContain('<td>mlp&lt;img src=x onerror=alert(1)&gt; training</td><td class="n">10,000</td><td class="n">9,000–11,000</td><td class="n">50,000</td><td class="n">0.20×</td>');
    expect(tab).toContain('<td>cnn training</td><td class="n">2,500</td><td class="n">2,000–3,000</td><td class="n">not available</td>');
    expect(tab).toContain('<li>PyTorch: not available: no torch &lt;/script&gt;&lt;script&gt;alert(2)&lt;/script&gt;</li>');
    expect(tab).toContain('<td>12 layers, IPU 0</td><td class="n">336.0 MiB</td><td class="n">computed</td>');
    expect(tab).toContain('<h3>Failed</h3><p>failed &lt;img src=x onerror=alert(1)&gt;</p>');
  });

  it('escapes every text from the file: no markup, no extra script, the same content security policy', () => {
    expect(tab).not.toMatch(/<img|<script|<\/script/i);
    expect(html.match(/<script\b/g)).toHaveLength(3);
    expect(html.match(/<\/script/gi)).toHaveLength(3);
    expect(/<meta http-equiv="Content-Security-Policy" content="([^"]*)">/.exec(html)![1]).toBe(/<meta http-equiv="Content-Security-Policy" content="([^"]*)">/.exec(renderReportHtml(data))![1]);
  });

  it('is given with --html only, and a bad results file is a command-line error naming it', () => {
    expect(() => benchSection(file, undefined)).toThrow(UsageError);
    expect(() => benchSection(file, undefined)).toThrow('--bench adds a Benchmarks tab to the HTML report; give --html FILE as well');
    const foreign = path.join(path.dirname(file), 'package.json');
    fs.writeFileSync(foreign, '{"name": "x"}');
    expect(() => benchSection(foreign, 'out.html')).toThrow(UsageError);
    expect(() => benchSection(foreign, 'out.html')).toThrow(`${foreign}: not usable benchmark results: it has no "format"`);
  });
});
