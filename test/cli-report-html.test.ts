import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runCli } from './support/cli.js';

/** `tilegraph report --html FILE`: the output is checked before any work; success says where the page went. */

const run = (...args: string[]) => runCli(args, 120_000);

describe('tilegraph report --html', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-report-html-'));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('writes one page and says where, printing nothing else', () => {
    const out = path.join(tmp, 'mlp.html');
    const r = run('report', 'examples/mlp.tg', '--html', out);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(new RegExp(`^HTML report of examples/mlp\\.tg written to ${out.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(\\d+(\\.\\d)? KiB\\)\\n$`));
    const html = fs.readFileSync(out, 'utf8');
    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(html).toContain('<title>tilegraph report: examples/mlp.tg</title>');
    // no temporary file left beside it
    expect(fs.readdirSync(tmp)).toEqual(['mlp.html']);
  });

  it('with --json: the JSON on stdout as before, the line about the page on stderr', () => {
    const out = path.join(tmp, 'both.html');
    const r = run('report', 'examples/mlp.tg', '--json', '--html', out);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ model: 'examples/mlp.tg', fits: true });
    expect(r.err).toContain(`written to ${out}`);
    expect(fs.existsSync(out)).toBe(true);
  });

  it('an existing folder is refused before any work (exit 2)', () => {
    const r = run('report', 'examples/mlp.tg', '--html', tmp);
    expect(r.code).toBe(2);
    expect(r.err).toBe(`tilegraph: --html ${tmp} is a folder; give a file name inside it\n`);
  });

  it('an input of the command is refused (exit 2): the model, the options file', () => {
    const model = path.join(tmp, 'copy.tg');
    fs.copyFileSync('examples/mlp.tg', model);
    const before = fs.readFileSync(model, 'utf8');
    let r = run('report', model, '--html', model);
    expect(r.code).toBe(2);
    expect(r.err).toContain('is an input of this command');
    expect(fs.readFileSync(model, 'utf8')).toBe(before);
    r = run('report', 'examples/transformer.tg', '--options', 'examples/transformer_pipelined.opts', '--html', 'examples/transformer_pipelined.opts');
    expect(r.code).toBe(2);
    expect(r.err).toContain('is an input of this command');
  });

  it('a folder that does not exist is refused (exit 2), and so is a missing model', () => {
    let r = run('report', 'examples/mlp.tg', '--html', path.join(tmp, 'no-such-folder', 'out.html'));
    expect(r.code).toBe(2);
    expect(r.err).toContain('does not exist');
    r = run('report', path.join(tmp, 'missing.tg'), '--html', path.join(tmp, 'missing.html'));
    expect(r.code).toBe(2);
    expect(fs.existsSync(path.join(tmp, 'missing.html'))).toBe(false);
  });

  it('a model that does not fit: the page is still written, with the diagnostic; exit 1', () => {
    const big = path.join(tmp, 'big.tg');
    fs.writeFileSync(big, 'model big {\n  input x: f32[4, 4096]\n  param w: f32[4096, 65536] = zeros()\n  output y = x @ w\n}\n');
    const out = path.join(tmp, 'big.html');
    const r = run('report', big, '--pipeline', 'inference', '--html', out);
    expect(r.code).toBe(1);
    expect(r.out).toContain(`written to ${out}`);
    expect(r.out).toContain('a tile does not fit');
    expect(r.err).toContain(`${big}:3:9: error: Out of memory on tile`);
    const html = fs.readFileSync(out, 'utf8');
    const data = JSON.parse(/<script type="application\/json" id="report-data">([^<]*)<\/script>/.exec(html)![1]!);
    expect(data.fits).toBe(false);
    expect(data.problems[0].message).toMatch(/^Out of memory on tile \d+/);
    expect(data.compile.passes).toEqual([]);
  });
});
