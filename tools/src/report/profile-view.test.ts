import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { COMPILE_PROFILE_FORMAT, ENGINE_PROFILE_FORMAT, readProfileFolder, writeJsonAtomic } from '@tilegraph/runtime';
import { formatSeconds, profileSection, profileTabHtml } from './profile-view.js';

/** The Profile tab from a profile folder: the measured compute sets and steps beside their estimates, every name escaped. */

const HOSTILE = '<img src=x onerror=alert(1)>';
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-profile-view-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A profile of two runs of 3 iterations: compute set 0 (relu) and 1 (the hostile name), 4 tiles. */
function writeFolder(): string {
  const computeSets = [
    { id: 0, executions: 6, seconds: 0.003, estimatedCycles: 720 },
    { id: 1, executions: 6, seconds: 0.0006, estimatedCycles: 1200 },
  ];
  const steps = [
    { id: 0, executions: 2, seconds: 0.004 },
    { id: 1, executions: 6, seconds: 0.003 },
    { id: 2, executions: 6, seconds: 0.0006 },
  ];
  const lastRun = {
    run: 2,
    program: 0,
    seconds: 0.002,
    estimatedCycles: 960,
    steps: steps.map((s) => ({ ...s, executions: s.executions / 2, seconds: s.seconds / 2 })),
    computeSets: computeSets.map((c) => ({ ...c, executions: 3, seconds: c.seconds / 2, estimatedCycles: c.estimatedCycles / 2 })),
    hostToDevice: { copies: 3, bytes: 96, seconds: 3e-6 },
    deviceToHost: { copies: 3, bytes: 48, seconds: 2e-6 },
    perfCounters: { inputStreams: ['in0'], input: [[1, 2, 3]], input_complete: [[1.1, 2.1, 3.1]], outputStreams: ['out0'], output: [[1.5, 2.5, 3.5]], output_complete: [[1.6, 2.6, 3.6]] },
  };
  const dir = path.join(tmp, 'prof', 'inference');
  writeJsonAtomic(path.join(dir, 'profile.json'), {
    format: ENGINE_PROFILE_FORMAT,
    version: 1,
    target: { ipus: 1, tilesPerIpu: 4, bytesPerTile: 638976, replicas: 1, clockHz: 1.33e9 },
    options: {},
    memory: { totalBytes: 300, peakBytes: 200, peakTile: 1, remoteBytesPerReplica: 0, tiles: [100, 200, 0, 0], alwaysLive: [50, 0, 0, 0] },
    computeSets: [
      { id: 0, name: 'relu', vertices: 4, tiles: 4, estimatedCycles: 120, unestimatedVertices: 0 },
      { id: 1, name: HOSTILE, vertices: 1, tiles: 1, estimatedCycles: 200, unestimatedVertices: 1 },
    ],
    streams: [],
    programs: [0],
    steps: [
      { id: 0, kind: 'repeat', name: 'x3', children: [1, 2] },
      { id: 1, kind: 'execute', name: 'relu', computeSet: 0, estimatedCycles: 120 },
      { id: 2, kind: 'execute', name: HOSTILE, computeSet: 1, estimatedCycles: 200 },
    ],
    execution: { runs: 2, programRuns: [2], seconds: 0.004, estimatedCycles: 1920, totals: { steps, computeSets }, hostAccess: { writes: { copies: 0, bytes: 0, seconds: 0 }, reads: { copies: 0, bytes: 0, seconds: 0 } }, history: [], historyDropped: 0, lastRun },
  });
  writeJsonAtomic(path.join(dir, 'compile.json'), {
    format: COMPILE_PROFILE_FORMAT,
    version: 1,
    model: 'net',
    modelName: 'inference',
    kind: 'inference',
    createdAt: '2024-01-01T00:00:00.000Z',
    backend: 'compiled',
    options: { deviceIterations: 3, replicationFactor: 1, gradientAccumulation: 1, logCycleCount: false },
    seconds: { passes: 0.01, start: 2 },
    passes: [],
    graphs: [],
    estimate: { cyclesPerRun: 1500, clockHz: 1.33e9, byKind: [] },
    memory: null,
    streams: [{ handle: 'in0', name: 'x', kind: 'input' }],
  });
  return path.dirname(dir);
}

describe('the Profile tab', () => {
  const section = profileSection(readProfileFolder(writeFolder()), 'net');
  const html = profileTabHtml(section);

  it('lists the compute sets, slowest first, with executions, measured time and estimated cycles', () => {
    const table = section.tables.find((t) => t.title === 'Compute sets')!;
    expect(table.rows.map((r) => r.slice(0, 5))).toEqual([
      ['relu', '6', '3.00 ms', '500 µs', '120'],
      [HOSTILE, '6', '600 µs', '100 µs', '200'],
    ]);
    expect(table.rows[1]![7]).toBe('1 on 1 tile, 1 without an estimate');
    expect(html).toContain('<td>relu</td><td class="n">6</td><td class="n">3.00 ms</td>');
  });

  it('shows the program steps as a tree, the latencies and the tiles', () => {
    const steps = section.tables.find((t) => t.title === 'Program steps')!;
    expect(steps.rows.map((r) => r[0])).toEqual(['repeat x3', 'execute relu', `execute ${HOSTILE}`]);
    expect(steps.depth).toEqual([0, 1, 1]);
    // relu: 6 executions × 120 cycles
    expect(steps.rows[1]![3]).toBe('720');
    const lat = section.tables.find((t) => t.title === 'Latency of the last run')!;
    expect(lat.rows[0]).toEqual(['round trip', `${formatSeconds(0.6)} (${formatSeconds(0.6)} – ${formatSeconds(0.6)})`]);
    expect(lat.caption).toContain('in0 = x');
    expect(section.cards.map((c) => c[1])).toEqual(['2.00 ms', '960 cycles', '1,500 cycles', '96 bytes', '48 bytes']);
    expect(html.match(/<i style=/g)).toHaveLength(4);
  });

  it('escapes every name', () => {
    expect(html).not.toContain(HOSTILE);
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;');
  });

  it('says when the profile is of another model than the report', () => {
    const other = profileSection(readProfileFolder(path.join(tmp, 'prof')), 'mlp');
    expect(other.notes[0]).toContain("The profile is of model 'net' and the report of 'mlp'");
  });
});
