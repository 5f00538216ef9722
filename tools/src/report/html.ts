import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { BenchSection, BenchSectionTable } from './bench-view.js';
import { CLIENT_JS } from './client.js';
import { ReportData } from './data.js';
import { profileTabHtml } from './profile-view.js';
import { REPORT_CSS } from './styles.js';

/** Text for HTML element content and attribute values: the five characters that matter, as references. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/**
 * JSON for a <script type="application/json"> block: `<`, `>` and `&` as \u escapes, so that no
 * name can close the block (`</script>`) or open a comment; JSON.parse reads them back unchanged.
 */
export function jsonForScript(value: unknown): string {
  return JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** A script inlined as is: it must not be able to end its own element. */
function inlineScript(code: string, what: string): string {
  if (/<\/script|<!--/i.test(code)) throw new Error(`internal: ${what} cannot be inlined in a <script> element`);
  return code;
}

function benchTableHtml(t: BenchSectionTable): string[] {
  const cell = (tag: 'th' | 'td', text: string, i: number) => `<${tag}${t.numeric[i] ? ' class="n"' : ''}>${escapeHtml(text)}</${tag}>`;
  return [
    `<h2>${escapeHtml(t.name)}</h2>`,
    `<p class="note">${escapeHtml(t.title)} (${t.seconds.toFixed(1)} s)</p>`,
    ...(t.error !== undefined ? [`<div class="problems"><h3>Failed</h3><p>${escapeHtml(t.error)}</p></div>`] : []),
    ...(t.rows.length
      ? [
          '<table class="t">',
          `<thead><tr>${t.head.map((h, i) => cell('th', h, i)).join('')}</tr></thead>`,
          '<tbody>',
          ...t.rows.map((r) => `<tr>${r.map((x, i) => cell('td', x, i)).join('')}</tr>`),
          '</tbody>',
          '</table>',
          `<p class="note">${escapeHtml(t.caption)}</p>`,
        ]
      : []),
    ...(t.footnotes.length || t.notes.length ? ['<ul class="warnings">', ...[...t.footnotes, ...t.notes].map((n) => `<li>${escapeHtml(n)}</li>`), '</ul>'] : []),
  ];
}

/**
 * The Benchmarks tab, as markup made here (every text escaped): the results' machine, date and
 * command, then a table per benchmark. It needs no script, so it is not drawn by the page's.
 */
export function benchTabHtml(b: BenchSection): string {
  const facts: (readonly [string, string])[] = [['results', b.file], ['date', b.date], ['commit', b.commit ?? 'not a git checkout'], ['command', b.command], ...b.facts];
  return [
    '<h2>Benchmarks</h2>',
    '<p class="note">Measured by <code>npm run bench</code> on the machine below, not on an IPU: medians of repeated measurements, each peer measured in the same run.</p>',
    '<table class="t facts">',
    ...facts.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th><td>${escapeHtml(v)}</td></tr>`),
    '</table>',
    ...b.benchmarks.flatMap(benchTableHtml),
  ].join('\n');
}

let dagreCache: string | undefined;

/**
 * dagre's browser bundle (graphlib included), with its licence and without its source-map
 * comment: the page lays the graph out again whenever a group is expanded or collapsed.
 */
export function dagreBundle(): string {
  if (dagreCache === undefined) {
    const require = createRequire(import.meta.url);
    const dir = path.join(path.dirname(require.resolve('@dagrejs/dagre/package.json')), 'dist');
    const licence = fs.readFileSync(path.join(dir, 'dagre.min.js.LEGAL.txt'), 'utf8').trim();
    const code = fs
      .readFileSync(path.join(dir, 'dagre.min.js'), 'utf8')
      .split('\n')
      .filter((l) => !l.startsWith('//# sourceMappingURL=') && !l.startsWith('/*! For license information'))
      .join('\n');
    dagreCache = inlineScript(`${licence}\n${code}`, 'the dagre bundle');
  }
  return dagreCache;
}

function sha256(code: string): string {
  return `'sha256-${createHash('sha256').update(code, 'utf8').digest('base64')}'`;
}

/**
 * The report as one HTML file: styles, dagre and the page's script inlined, the data in a JSON
 * block. The content security policy allows only those two scripts (by hash) and no fetches, so
 * nothing is loaded from the network and markup smuggled into a name could not run. With
 * `data.bench` (tilegraph report --bench) the page has a fifth tab, Benchmarks; with `data.profile`
 * (--profile) a Profile tab.
 */
export function renderReportHtml(data: ReportData): string {
  const scripts = [dagreBundle(), inlineScript(CLIENT_JS, 'the report script')];
  const csp = `default-src 'none'; script-src ${scripts.map(sha256).join(' ')}; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'`;
  const title = `tilegraph report: ${data.file}`;
  // the Benchmarks tab is markup already: the script has no use for its data
  const { bench: _bench, profile: _profile, ...scriptData } = data;
  return [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    `<meta http-equiv="Content-Security-Policy" content="${escapeHtml(csp)}">`,
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    '<meta name="generator" content="tilegraph report --html">',
    `<title>${escapeHtml(title)}</title>`,
    `<style>${REPORT_CSS}</style>`,
    '</head>',
    '<body>',
    '<header class="top">',
    `  <div class="brand"><span class="logo">tilegraph</span> report <span class="file">${escapeHtml(data.file)}</span></div>`,
    '  <div class="chips" id="chips"></div>',
    '  <nav class="tabs" role="tablist">',
    '    <button role="tab" data-tab="graph" aria-selected="true">Graph</button>',
    '    <button role="tab" data-tab="schedule">Schedule</button>',
    '    <button role="tab" data-tab="memory">Memory</button>',
    '    <button role="tab" data-tab="compile">Compile</button>',
    ...(data.bench ? ['    <button role="tab" data-tab="bench">Benchmarks</button>'] : []),
    ...(data.profile ? ['    <button role="tab" data-tab="profile">Profile</button>'] : []),
    '  </nav>',
    '</header>',
    '<div id="problems"></div>',
    '<main>',
    '  <section id="tab-graph" class="tab graph-tab"></section>',
    '  <section id="tab-schedule" class="tab" hidden></section>',
    '  <section id="tab-memory" class="tab" hidden></section>',
    '  <section id="tab-compile" class="tab" hidden></section>',
    ...(data.bench ? [`  <section id="tab-bench" class="tab" hidden>\n${benchTabHtml(data.bench)}\n  </section>`] : []),
    ...(data.profile ? [`  <section id="tab-profile" class="tab" hidden>\n${profileTabHtml(data.profile)}\n  </section>`] : []),
    '</main>',
    '<noscript><p class="noscript">This report draws itself with JavaScript (inlined in this file; it loads nothing from the network). Allow scripts for this file to see it.</p></noscript>',
    `<script type="application/json" id="report-data">${jsonForScript(scriptData)}</script>`,
    ...scripts.map((s) => `<script>${s}</script>`),
    '</body>',
    '</html>',
    '',
  ].join('\n');
}
