import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runCli } from './support/cli.js';

/**
 * Profiling from the command line: `run` and `train --profile DIR` write the profile folder and
 * say where; `report --profile DIR --html FILE` shows its measurements in a Profile tab; a
 * missing or malformed profile file is a diagnostic naming it.
 */

const run = (...args: string[]) => runCli(args, 600_000);

interface EngineJson {
  computeSets: { id: number; name: string; estimatedCycles: number }[];
  execution: { runs: number; lastRun: { computeSets: { id: number; executions: number }[] } };
}

describe('tilegraph --profile', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-cli-profile-'));
  const prof = path.join(tmp, 'prof');
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  beforeAll(() => {
    const r = run('run', 'examples/mlp.tg', '--backend', 'ipu', '--profile', prof, '--no-progress');
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    expect(r.out).toContain(`profile written to ${path.join(path.resolve(prof), 'inference')}`);
  }, 600_000);

  it('run --profile writes the compile and the run into DIR/inference', () => {
    expect(fs.readdirSync(path.join(prof, 'inference')).sort()).toEqual(['compile.json', 'profile.json']);
    const engine = JSON.parse(fs.readFileSync(path.join(prof, 'inference', 'profile.json'), 'utf8')) as EngineJson;
    expect(engine.execution.runs).toBe(1);
  });

  it('report --profile DIR --html FILE: a Profile tab with the compute sets, their executions and estimates', () => {
    const out = path.join(tmp, 'report.html');
    const r = run('report', 'examples/mlp.tg', '--pipeline', 'inference', '--profile', prof, '--html', out);
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const html = fs.readFileSync(out, 'utf8');
    expect(html).toContain('<button role="tab" data-tab="profile">Profile</button>');
    const tab = html.slice(html.indexOf('<section id="tab-profile"'), html.indexOf('</section>', html.indexOf('<section id="tab-profile"')));
    const engine = JSON.parse(fs.readFileSync(path.join(prof, 'inference', 'profile.json'), 'utf8')) as EngineJson;
    expect(engine.computeSets.length).toBeGreaterThan(0);
    for (const cs of engine.computeSets) {
      expect(tab).toContain(cs.name);
      expect(tab).toContain(`<td class="n">${cs.estimatedCycles.toLocaleString('en-US')}</td>`);
    }
    for (const c of engine.execution.lastRun.computeSets) expect(c.executions).toBe(1);
    expect(tab).toContain('<h3>Compute sets</h3>');
    expect(tab).toContain('<h3>Program steps</h3>');
    expect(tab).toContain('<h3>Latency of the last run</h3>');
    // the report's data block does not carry the tab: it is markup
    expect(html.match(/<script type="application\/json" id="report-data">[^<]*<\/script>/)![0]).not.toContain('tab-profile');
  });

  it('a malformed or missing profile file is a diagnostic naming it, before anything is built', () => {
    const bad = path.join(tmp, 'bad');
    fs.cpSync(prof, bad, { recursive: true });
    const engine = path.join(bad, 'inference', 'profile.json');
    fs.writeFileSync(engine, fs.readFileSync(engine, 'utf8').slice(0, 200));
    const out = path.join(tmp, 'bad.html');
    let r = run('report', 'examples/mlp.tg', '--pipeline', 'inference', '--profile', bad, '--html', out);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`${engine}: not valid JSON`);
    expect(fs.existsSync(out)).toBe(false);
    fs.rmSync(path.join(bad, 'inference', 'compile.json'));
    r = run('report', 'examples/mlp.tg', '--pipeline', 'inference', '--profile', bad, '--html', out);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`${path.join(bad, 'inference', 'compile.json')}: missing`);
  });

  it('the flags are checked: --profile needs --html (report) and the compiled backend (run)', () => {
    let r = run('report', 'examples/mlp.tg', '--profile', prof);
    expect(r.code).toBe(2);
    expect(r.err).toContain('--profile adds a Profile tab to the HTML report; give --html FILE as well');
    r = run('run', 'examples/mlp.tg', '--profile', path.join(tmp, 'ref'));
    expect(r.code).toBe(2);
    expect(r.err).toContain('add --backend ipu');
  });

  it('train --profile: the compile and every step into DIR/training', () => {
    const dir = path.join(tmp, 'train');
    const r = run('train', 'examples/mlp.tg', '--steps', '2', '--profile', dir, '--no-progress');
    expect(r.code).toBe(0);
    const where = path.join(path.resolve(dir), 'training');
    expect(r.out).toContain(`profiling into ${where}`);
    const engine = JSON.parse(fs.readFileSync(path.join(where, 'profile.json'), 'utf8')) as EngineJson;
    expect(engine.execution.runs).toBe(2);
  });
});
