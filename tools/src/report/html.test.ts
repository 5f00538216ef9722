import { createHash } from 'node:crypto';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as vm from 'node:vm';
import { generatePoplar } from '@tilegraph/codegen-poplar';
import { ModelBuilder } from '@tilegraph/frontend';
import { DEFAULT_STEP, buildTrainingModule, makeOptimizer } from '@tilegraph/passes';
import { Options } from '@tilegraph/frontend';
import { htmlReportData } from '../commands/report.js';
import { BuiltStep, buildStep } from '../commands/step.js';
import { CLIENT_JS } from './client.js';
import { ReportData } from './data.js';
import { escapeHtml, jsonForScript, renderReportHtml } from './html.js';

/** The HTML report as a string: its structure, escaping, no network, and the figures it carries. */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const HOSTILE = '<img src=x onerror=alert(1)>';
const CLOSER = '</script><script>alert(2)</script>';
const FILE = '"><svg onload=alert(3)>.tg';

function report(step: BuiltStep, file: string): { data: ReportData; html: string } {
  const generated = generatePoplar(step.module, { allowOutOfMemory: true });
  const data = htmlReportData(file, step, generated, { loadAndPasses: 1, generate: 1 });
  return { data, html: renderReportHtml(data) };
}

/** A training step whose names, scopes, block and source file are all markup. */
function hostileStep(): BuiltStep {
  const m = new ModelBuilder(`m${HOSTILE}`);
  const x = m.input(`x${HOSTILE}`, 'float32', [4, 8]);
  const y = m.input('y', 'int32', [4]);
  const logits = m.block(`enc${CLOSER}`, { ipu: 0 }, () => m.nameScope(`scope${HOSTILE}`, () => m.matmul(x, m.parameter(`w${HOSTILE}`, 'float32', [8, 3]))));
  m.output('logits', logits);
  m.loss(m.crossEntropy(logits, y));
  for (const op of m.graph.ops) op.loc = { frames: [{ file: FILE, line: 7, col: 3, fn: `f${CLOSER}` }] };
  const t = buildTrainingModule(m.graph, DEFAULT_STEP, makeOptimizer('SGD', { lr: 0.1 }));
  return { module: t.module, options: new Options(), pipeline: 'training', warnings: t.diagnostics, timings: t.timings, timePasses: false, placement: t.placement };
}

function dataBlock(html: string): ReportData {
  const m = /<script type="application\/json" id="report-data">([^<]*)<\/script>/.exec(html);
  expect(m).not.toBeNull();
  return JSON.parse(m![1]!) as ReportData;
}

describe('the HTML report', () => {
  const hostile = report(hostileStep(), `model${HOSTILE}.tg`);

  it('is one page with its four tabs, its data and two inline scripts', () => {
    const { html } = hostile;
    expect(html.startsWith('<!doctype html>\n<html lang="en">')).toBe(true);
    expect(html.trimEnd().endsWith('</html>')).toBe(true);
    for (const tab of ['graph', 'schedule', 'memory', 'compile']) {
      expect(html).toContain(`data-tab="${tab}"`);
      expect(html).toContain(`<section id="tab-${tab}"`);
    }
    expect(html.match(/<script\b/g)).toHaveLength(3);
    expect(html.match(/<style>/g)).toHaveLength(1);
    // the content security policy allows exactly the two inline scripts, by hash
    const scripts = [...html.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]!);
    expect(scripts).toHaveLength(2);
    const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]*)">/.exec(html)![1]!.replace(/&#39;/g, "'");
    expect(csp).toMatch(/^default-src 'none'; script-src 'sha256-[^']+' 'sha256-[^']+'; /);
    for (const s of scripts) expect(csp).toContain(`'sha256-${createHash('sha256').update(s).digest('base64')}'`);
    expect(csp).not.toMatch(/unsafe-inline'[^;]*script|script-src[^;]*unsafe/);
  });

  it('escapes every name from the model: none of them is markup in the page', () => {
    const { html } = hostile;
    for (const s of [HOSTILE, CLOSER, FILE, '<img', '<svg']) expect(html).not.toContain(s);
    expect(html).toContain(`<title>tilegraph report: model&lt;img src=x onerror=alert(1)&gt;.tg</title>`);
    // the only closing script tags are the three elements' own
    expect(html.match(/<\/script/gi)).toHaveLength(3);
    // and the data reads back unchanged
    const data = dataBlock(html);
    expect(data.file).toBe(`model${HOSTILE}.tg`);
    expect(data.module).toBe(`m${HOSTILE}`);
    const ops = data.graphs.flatMap((g) => g.ops);
    expect(ops.some((op) => op.n === `w${HOSTILE}`)).toBe(true);
    expect(ops.some((op) => op.b === `enc${CLOSER}`)).toBe(true);
    expect(data.strings).toContain(`scope${HOSTILE}`);
    expect(data.strings).toContain(`${FILE}:7:3`);
    expect(data.strings.some((s) => s.includes(`in f${CLOSER}`))).toBe(false); // one frame: no stack string
    expect(data.memory.perIpu[0]!.atPeak.length + data.memory.perIpu[0]!.fullestTileAlwaysLive.length).toBeGreaterThan(0);
  });

  it('loads nothing from the network', () => {
    for (const { html } of [hostile, report(buildStep(path.join(ROOT, 'examples/mlp.tg'), { pipeline: 'training', optimizer: 'sgd' }), 'examples/mlp.tg')]) {
      expect(html).not.toMatch(/\b(?:src|href|action|formaction|poster|data|background|xlink:href)\s*=\s*["']?\s*(?:https?:|\/\/|ftp:)/i);
      expect(html).not.toMatch(/url\(\s*["']?\s*(?:https?:|\/\/)/i);
      expect(html).not.toMatch(/@import|<link\b|<iframe\b|<object\b|<embed\b|<img\b|<base\b/i);
      expect(html).not.toMatch(/sourceMappingURL/);
      expect(html).not.toMatch(/\bfetch\(|XMLHttpRequest|WebSocket|EventSource|importScripts|sendBeacon/);
    }
  });

  it('the page script is valid JavaScript and uses no template literals (it is one)', () => {
    expect(() => new vm.Script(CLIENT_JS)).not.toThrow();
    expect(CLIENT_JS).not.toMatch(/`|\$\{/);
    // names go in as text
    expect(CLIENT_JS).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
  });

  it('escapeHtml and jsonForScript', () => {
    expect(escapeHtml(`<a href="x" title='y'>&`)).toBe('&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;');
    const value = { s: `</script><!-- ${HOSTILE} & \u2028` };
    const text = jsonForScript(value);
    expect(text).not.toMatch(/[<>&\u2028]/);
    expect(JSON.parse(text)).toEqual(value);
  });
});

describe('the report of the pipelined transformer', () => {
  const step = buildStep(path.join(ROOT, 'examples/transformer.tg'), { pipeline: 'training', optimizer: 'sgd', options: path.join(ROOT, 'examples/transformer_pipelined.opts'), arg: ['layers=4'] });
  const { data } = report(step, 'examples/transformer.tg');

  it('has every graph with its ops, their types and the user\'s lines', () => {
    expect(data.graphs.map((g) => g.name)).toEqual(['stage0', 'stage1', 'stage2', 'stage3', 'stage4', 'stage5', 'stage6', 'update']);
    const n = [...step.module.graphs.values()].reduce((a, g) => a + g.ops.length, 0);
    expect(data.graphs.reduce((a, g) => a + g.ops.length, 0)).toBe(n);
    const stage0 = data.graphs[0]!;
    const matmul = stage0.ops.find((op) => op.k === 'matmul')!;
    expect(matmul.t).toMatch(/^f32\[\d+(,\d+)*\]$/);
    // the user's line, past the standard library; the whole stack kept
    expect(data.strings[matmul.l]).toMatch(/transformer\.tg:\d+:\d+$/);
    expect(data.strings[matmul.f!]).toMatch(/^std\/nn\.tg:\d+:\d+ in multihead_attention\n/);
    expect(matmul.ipu).toBe(0);
    expect(data.strings[matmul.s]).toBe('encoder.layers.0/self_attn');
    for (const g of data.graphs) for (const op of g.ops) for (const i of op.i) expect(i).toBeLessThan(g.ops.length);
  });

  it('draws the schedule: every IPU busy, the three parts of the pipeline and the update, the estimate\'s length', () => {
    const tl = data.timeline;
    const p = tl.pipeline!;
    expect(tl.kind).toBe('pipelined');
    expect(tl.ipus).toBe(4);
    expect(tl.bands.map((b) => b.kind)).toEqual(['ramp-up', 'main', 'ramp-down', 'update']);
    for (let ipu = 0; ipu < 4; ipu++) expect(tl.segments.some((s) => s.ipu === ipu && s.stage !== undefined)).toBe(true);
    // each stage runs once per micro-batch
    for (const s of p.stages) expect(tl.segments.filter((x) => x.stage === s.index)).toHaveLength(p.microBatches);
    expect(Math.abs(tl.total - p.cyclesPerWeightUpdate)).toBeLessThanOrEqual(1);
    expect(p.bubble.formula).toBeCloseTo(6 / 14, 12);
    for (const s of tl.segments) expect(s.end).toBeGreaterThan(s.start);
  });

  it('gives every tile its bytes; the fullest is the plan\'s', () => {
    const mem = data.memory;
    expect(mem.perIpu).toHaveLength(4);
    for (const m of mem.perIpu) {
      expect(m.tilesAlwaysLive).toHaveLength(1472);
      expect(m.tilesPeak).toHaveLength(1472);
      const totals = m.tilesAlwaysLive.map((a, t) => a + m.tilesPeak[t]!);
      const top = Math.max(...totals);
      expect(top).toBeGreaterThanOrEqual(m.maxTileBytes);
      expect(top).toBeLessThanOrEqual(m.maxTileBytes + 1);
      expect(totals[m.maxTile]).toBe(top);
      expect(m.atPeak.length).toBeGreaterThan(0);
      expect(m.atPeak[0]!.location).toMatch(/transformer\.tg:\d+:\d+$/);
    }
  });

  it('times the passes, with the ops after each', () => {
    const names = data.compile.passes.map((p) => p.pass);
    expect(names).toContain('autograd');
    const autograd = data.compile.passes.find((p) => p.pass === 'autograd')!;
    const placement = data.compile.passes.find((p) => p.pass === 'placement')!;
    expect(autograd.ops!).toBeGreaterThan(placement.ops!);
    expect(data.compile.passes[data.compile.passes.length - 1]!.ops).toBe(data.graphs.reduce((a, g) => a + g.ops.length, 0));
  });
});

describe('the report of a step without a pipeline', () => {
  it('has one row per IPU of the sharded step, the graphs one after another', () => {
    const step = buildStep(path.join(ROOT, 'examples/transformer.tg'), { pipeline: 'training', optimizer: 'sgd' });
    const { data } = report(step, 'examples/transformer.tg');
    const tl = data.timeline;
    expect(tl.kind).toBe('step');
    expect(tl.ipus).toBe(2);
    expect(tl.runCycles).toBe(data.graphs.reduce((a, g) => a + g.executions * g.cycles, 0));
    for (let ipu = 0; ipu < 2; ipu++) expect(tl.segments.some((s) => s.ipu === ipu)).toBe(true);
    for (const s of tl.segments) expect(s.ipu).toBeLessThan(tl.ipus);
    expect(tl.bands.map((b) => b.kind)).toEqual(tl.bands.map(() => 'graph'));
  });
});
