import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { runCli } from './support/cli.js';

/** `tilegraph report` as a user runs it: the memory plan as a table and as JSON. */

const run = (...args: string[]) => runCli(args, 120_000);

describe('tilegraph report', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-report-'));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('prints a table per IPU: always-live bytes, the peak and where, the fullest tile and what is live on it', () => {
    const r = run('report', 'examples/transformer.tg', '--optimizer', 'adam');
    expect(r.code).toBe(0);
    expect(r.out).toContain('memory plan of examples/transformer.tg (training) on 2 IPUs of 1472 tiles × 638976 bytes');
    expect(r.out).toMatch(/^IPU +always live +peak of the rest +fullest tile +bytes +use +peak at$/m);
    expect(r.out).toMatch(/^ +0 +[\d.]+ KiB +[\d.]+ KiB +\d+ +\d+ +[\d.]+% +\w+ in graph '(step|update)' at examples\/transformer\.tg:\d+:\d+$/m);
    expect(r.out).toContain('IPU 1: fullest tile');
    // what is live is named with the line of the user's model that made it
    expect(r.out).toMatch(/(activation|temporary) +\S*encoder\.layers\.\d\.\S+ +\w+ at examples\/transformer\.tg:16:15/);
  });

  it('--json gives one entry per IPU with the same figures', () => {
    const r = run('report', 'examples/transformer.tg', '--optimizer', 'adam', '--json');
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.out);
    expect(doc).toMatchObject({ model: 'examples/transformer.tg', pipeline: 'training', ipus: 2, tilesPerIpu: 1472, bytesPerTile: 638976, fits: true });
    expect(doc.perIpu).toHaveLength(2);
    for (const m of doc.perIpu) {
      expect(m.maxTileBytes).toBeGreaterThanOrEqual(m.maxTileAlwaysLive);
      expect(m.alwaysLiveBytes).toBeGreaterThan(0);
      expect(m.largestLive.length).toBeGreaterThan(0);
    }
    // each IPU holds the optimizer state of its own layer
    expect(doc.perIpu[0].alwaysLiveBytes).toBeGreaterThan(0.5 * doc.perIpu[1].alwaysLiveBytes);
  });

  it('a model that does not fit: the plan is printed, the out-of-memory diagnostic follows, exit 1', () => {
    const big = path.join(tmp, 'big.tg');
    fs.writeFileSync(big, 'model big {\n  input x: f32[4, 4096]\n  param w: f32[4096, 65536] = zeros()\n  output y = x @ w\n}\n');
    const r = run('report', big, '--pipeline', 'inference', '--json');
    expect(r.code).toBe(1);
    expect(JSON.parse(r.out).fits).toBe(false);
    expect(r.err).toContain(`${big}:3:9: error: Out of memory on tile`);
    expect(r.err).toContain('live there: w (state');
  });

  describe('the BERT-base-shaped example trained with Adam', () => {
    it('fits sharded over 4 IPUs', () => {
      const r = run('report', 'examples/bert.tg', '--optimizer', 'adam', '--json');
      expect(r.code).toBe(0);
      const doc = JSON.parse(r.out);
      expect(doc.ipus).toBe(4);
      for (const m of doc.perIpu) expect(m.maxTileBytes).toBeLessThan(0.6 * doc.bytesPerTile);
    });

    it('does not fit on one IPU; the diagnostic offers the remedies, with the bytes off-chip state saves', () => {
      const r = run('report', 'examples/bert.tg', '--optimizer', 'adam', '--arg', 'ipus=1', '--json');
      expect(r.code).toBe(1);
      expect(r.err).toMatch(/^examples\/bert\.tg:16:15: error: Out of memory on tile \d+/);
      expect(r.err).toContain('recomputation_checkpoint(...) and set _Popart.set("autoRecomputation", 4)');
      const saves = /useOnChipStorage\(False\)\)\) — saves (\d+) bytes on this tile/.exec(r.err);
      const over = /; (\d+) bytes too many on this tile/.exec(r.err);
      expect(Number(saves![1])).toBeGreaterThan(Number(over![1]));
    });

    it('fits on one IPU with a checkpoint per layer, RecomputeAll and the optimizer state off chip', () => {
      const opts = path.join(tmp, 'fit.txt');
      fs.writeFileSync(opts, '_Popart.set("autoRecomputation", 4)\nTensorLocations.setOptimizerLocation(TensorLocationSettings().useOnChipStorage(False))\n');
      const r = run('report', 'examples/bert.tg', '--optimizer', 'adam', '--arg', 'ipus=1', 'checkpoints=true', '--options', opts, '--json');
      expect(r.err).toBe('');
      expect(r.code).toBe(0);
      const m = JSON.parse(r.out).perIpu[0];
      expect(m.remoteBytes).toBeGreaterThan(600 * 2 ** 20);
      expect(m.maxTileBytes).toBeLessThan(638976);
    });
  });
});
