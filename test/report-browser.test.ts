import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Browser, Page, chromium } from 'playwright-core';
import { runCli } from './support/cli.js';

/**
 * `tilegraph report --html` of the pipelined transformer, opened from a file: URL in headless
 * Chromium (Debian's `chromium` package) with every request that is not a file: URL refused: the
 * page draws the graph with the lines of the model, one schedule row per IPU, one cell per tile,
 * and finds an op by name.
 */

const CHROMIUM = '/usr/bin/chromium';
const present = fs.existsSync(CHROMIUM);
const suite = present ? describe : describe.skip;
const SKIPPED = `skipped: ${CHROMIUM} not found; install it with apt-get install chromium, as .ci/run does`;
const title = present ? 'tilegraph report --html in headless Chromium' : `tilegraph report --html in headless Chromium (${SKIPPED})`;
if (!present) console.warn(`test/report-browser.test.ts ${SKIPPED}`);

suite(title, () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-report-browser-'));
  const out = path.join(tmp, 'out.html');
  const problems: string[] = [];
  const refused: string[] = [];
  let browser: Browser | undefined;
  let page: Page;

  // Polled from here: page.waitForFunction evaluates its predicate with eval inside the page,
  // which the report's content security policy refuses (as it should).
  const idle = async () => {
    const deadline = Date.now() + 60_000;
    while (await page.locator('#canvas .busy').count() > 0) {
      if (Date.now() > deadline) throw new Error('the graph view stayed busy for 60 s');
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  beforeAll(async () => {
    // a profiled run of a small model, for the Profile tab
    const prof = path.join(tmp, 'prof');
    const p = runCli(['run', 'examples/mlp.tg', '--backend', 'ipu', '--no-progress', '--profile', prof], 600_000);
    expect(p.code).toBe(0);
    const r = runCli(['report', 'examples/transformer.tg', '--options', 'examples/transformer_pipelined.opts', '--arg', 'layers=4', '--html', out, '--profile', prof]);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: process.getuid?.() === 0 ? ['--no-sandbox'] : [] });
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    await context.route('**', (route) => {
      const url = route.request().url();
      if (url.startsWith('file:')) return route.continue();
      refused.push(url);
      return route.abort();
    });
    page = await context.newPage();
    page.on('pageerror', (e) => problems.push(`page error: ${String(e)}`));
    page.on('console', (m) => {
      if (m.type() === 'error') problems.push(`console: ${m.text()}`);
    });
    page.on('dialog', (d) => {
      problems.push(`dialog: ${d.message()}`);
      void d.dismiss();
    });
    await page.goto(pathToFileURL(out).href);
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60_000 });
  }, 900_000);

  afterAll(async () => {
    await browser?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('draws the graph: ops with their type and the line of the model that made them', async () => {
    const located = page.locator('#canvas svg .node.op', { hasText: 'transformer.tg:' });
    expect(await located.count()).toBeGreaterThan(3);
    expect(await located.first().textContent()).toMatch(/f32\[[\d,]+\].*examples\/transformer\.tg:\d+:\d+/);
    // a collapsed scope opens on a click
    await page.click('button:text-is("fit")');
    const group = page.locator('#canvas svg .node.group').first();
    const name = (await group.locator('text.kind').textContent())!.replace(/^▸ /, '');
    const before = await page.locator('#canvas svg .node').count();
    await group.click();
    await idle();
    expect(await page.locator('#canvas svg .node').count()).toBeGreaterThan(before);
    const label = page.locator('#canvas svg .cluster .clabel', { hasText: name });
    expect(await label.count()).toBeGreaterThan(0);
  });

  it('finds an op by name, in another graph, opens its scopes and shows it in the middle', async () => {
    await page.fill('#search', 'encoder.layers.3.linear2');
    await page.press('#search', 'Enter');
    const hit = page.locator('#canvas svg .node.hit');
    await hit.waitFor({ timeout: 60_000 });
    await idle();
    expect(await hit.textContent()).toContain('encoder.layers.3.linear2');
    // the layer on IPU 3 is in stage 3's graph
    expect(await page.locator('#graph-pick').inputValue()).toBe('3');
    const box = (await hit.boundingBox())!;
    const canvas = (await page.locator('#canvas').boundingBox())!;
    const cx = box.x + box.width / 2;
    const cy = box.y + box.height / 2;
    expect(cx).toBeGreaterThan(canvas.x);
    expect(cx).toBeLessThan(canvas.x + canvas.width);
    expect(cy).toBeGreaterThan(canvas.y);
    expect(cy).toBeLessThan(canvas.y + canvas.height);
    expect(await page.locator('#details h3').textContent()).toContain('encoder.layers.3.linear2');
    expect(await page.locator('#search-count').textContent()).toMatch(/^1 \/ \d+ found$/);
  });

  it('the schedule has one row per IPU, with the ramp-up, the main part, the ramp-down and the weight update', async () => {
    await page.click('.tabs button[data-tab="schedule"]');
    expect(await page.locator('.gantt .gantt-row').count()).toBe(4);
    for (let ipu = 0; ipu < 4; ipu++) expect(await page.locator(`.gantt .gantt-row[data-ipu="${ipu}"] .seg`).count()).toBeGreaterThan(0);
    // each band names itself (shortened when narrow, whole on hover)
    expect(await page.locator('.gantt .band title').allTextContents()).toEqual(['ramp-up', 'main', 'ramp-down', 'weight update']);
    const shown = await page.locator('.gantt .band-label').allTextContents();
    expect(shown.slice(0, 3)).toEqual(['ramp-up', 'main', 'ramp-down']);
    expect(await page.locator('#tab-schedule .card').first().textContent()).toContain('42.9%');
  });

  it('memory: one heat-map cell per tile of each IPU, the fullest outlined, a tooltip with the headroom', async () => {
    await page.click('.tabs button[data-tab="memory"]');
    expect(await page.locator('.heat').count()).toBe(4);
    for (let ipu = 0; ipu < 4; ipu++) {
      expect(await page.locator(`.heat[data-ipu="${ipu}"] .tile`).count()).toBe(1472);
      expect(await page.locator(`.heat[data-ipu="${ipu}"] .tile.max`).count()).toBe(1);
    }
    await page.locator('.heat[data-ipu="1"] .tile.max').hover();
    const tip = page.locator('.tip');
    await tip.waitFor({ state: 'visible' });
    expect(await tip.textContent()).toMatch(/IPU 1, tile \d+ .*headroom/);
  });

  it('the compile tab lists the passes with their time and ops', async () => {
    await page.click('.tabs button[data-tab="compile"]');
    const rows = await page.locator('#tab-compile table.t').first().locator('tbody tr').allTextContents();
    expect(rows.length).toBeGreaterThan(10);
    expect(rows.some((r) => r.includes('autograd'))).toBe(true);
  });

  it('the profile tab shows the measured compute sets and a cell per tile', async () => {
    await page.click('.tabs button[data-tab="profile"]');
    expect(await page.locator('#tab-profile').isVisible()).toBe(true);
    const rows = await page.locator('#tab-profile table.t', { has: page.locator('th', { hasText: 'compute set' }) }).locator('tbody tr').allTextContents();
    expect(rows.some((r) => r.includes('fused_add'))).toBe(true);
    expect(await page.locator('#tab-profile .profile-tiles i').count()).toBe(1472);
  });

  it('takes a screenshot', async () => {
    await page.click('.tabs button[data-tab="graph"]');
    const file = path.join(tmp, 'report.png');
    await page.screenshot({ path: file });
    const png = fs.readFileSync(file);
    expect([...png.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    expect(png.length).toBeGreaterThan(10_000);
  });

  it('ran without script errors and asked the network for nothing', () => {
    expect(problems).toEqual([]);
    expect(refused).toEqual([]);
  });
});
