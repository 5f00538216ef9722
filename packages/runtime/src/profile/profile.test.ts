import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Options } from '@tilegraph/frontend';
import { COMPILE_PROFILE_FORMAT, ENGINE_PROFILE_FORMAT, readCompileProfile, readEngineProfile, readProfileFolder, writeJsonAtomic } from './format.js';
import { computeLatency, hostIpuLatency, ipuHostLatency, latency, perfCounterLists } from './latency.js';
import { disposeProfilePlan, parseEngineOptions, profilePlan } from './settings.js';
import { thrownDiagnostic } from '../../../ir/src/testing/index.js';

/** The profile folder's formats, the engine options a profiled model gets, and PopTorch's latencies. */

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-profile-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const failure = thrownDiagnostic;

/** A small valid profile.json: one compute set executed twice in the last run (of two). */
function engineProfile(): Record<string, unknown> {
  const run = {
    run: 2,
    program: 0,
    seconds: 0.002,
    estimatedCycles: 240,
    steps: [
      { id: 0, executions: 1, seconds: 0.0015 },
      { id: 1, executions: 2, seconds: 0.001 },
    ],
    computeSets: [{ id: 0, executions: 2, seconds: 0.001, estimatedCycles: 240 }],
    hostToDevice: { copies: 2, bytes: 64, seconds: 1e-6 },
    deviceToHost: { copies: 2, bytes: 64, seconds: 1e-6 },
    perfCounters: { inputStreams: ['in0'], input: [[1, 2]], input_complete: [[1.1, 2.1]], outputStreams: ['out0'], output: [[1.5, 2.5]], output_complete: [[1.6, 2.7]] },
  };
  return {
    format: ENGINE_PROFILE_FORMAT,
    version: 1,
    writer: 'test',
    target: { ipus: 1, tilesPerIpu: 4, bytesPerTile: 638976, replicas: 1, clockHz: 1.33e9 },
    options: { 'autoReport.all': 'true' },
    memory: { totalBytes: 30, peakBytes: 20, peakTile: 1, remoteBytesPerReplica: 0, tiles: [10, 20, 0, 0], alwaysLive: [10, 0, 0, 0] },
    computeSets: [{ id: 0, name: 'relu', vertices: 2, tiles: 2, estimatedCycles: 120, unestimatedVertices: 0 }],
    streams: [{ id: 0, handle: 'in0', direction: 'toDevice', bytesPerCopy: 32 }],
    programs: [0],
    steps: [
      { id: 0, kind: 'repeat', name: 'x2', children: [1] },
      { id: 1, kind: 'execute', name: 'relu', computeSet: 0, estimatedCycles: 120 },
    ],
    execution: {
      runs: 2,
      programRuns: [2],
      seconds: 0.004,
      estimatedCycles: 480,
      totals: { steps: run.steps, computeSets: run.computeSets },
      hostAccess: { writes: { copies: 1, bytes: 8, seconds: 0 }, reads: { copies: 0, bytes: 0, seconds: 0 } },
      history: [{ run: 1, program: 0, seconds: 0.002, estimatedCycles: 240 }, { run: 2, program: 0, seconds: 0.002, estimatedCycles: 240 }],
      historyDropped: 0,
      lastRun: run,
    },
  };
}

function compileProfile(): Record<string, unknown> {
  return {
    format: COMPILE_PROFILE_FORMAT,
    version: 1,
    model: 'm',
    modelName: 'inference',
    kind: 'inference',
    createdAt: '2024-01-01T00:00:00.000Z',
    backend: 'compiled',
    options: { deviceIterations: 2, replicationFactor: 1, gradientAccumulation: 1, logCycleCount: true },
    seconds: { passes: 0.1, start: 1 },
    passes: [],
    graphs: [{ name: 'forward', executionsPerRun: 2, ops: 3, byKind: { relu: 1 }, estimatedCycles: 200 }],
    estimate: { cyclesPerRun: 400, clockHz: 1.33e9, byKind: [{ kind: 'relu', ops: 2, cycles: 400 }] },
    memory: null,
    streams: [{ handle: 'in0', name: 'x', kind: 'input' }],
  };
}

function folder(name: string, engine: unknown = engineProfile(), compile: unknown = compileProfile()): string {
  const dir = path.join(tmp, name, 'inference');
  writeJsonAtomic(path.join(dir, 'profile.json'), engine);
  writeJsonAtomic(path.join(dir, 'compile.json'), compile);
  return path.dirname(dir);
}

describe('the profile files', () => {
  it('are read back and checked, the model folder found under the folder given', () => {
    const dir = folder('ok');
    const f = readProfileFolder(dir);
    expect(f.dir).toBe(path.join(dir, 'inference'));
    expect(f.engine.execution?.lastRun?.computeSets).toEqual([{ id: 0, executions: 2, seconds: 0.001, estimatedCycles: 240 }]);
    expect(f.compile.streams[0]).toEqual({ handle: 'in0', name: 'x', kind: 'input' });
    // the model folder itself works too, and no temporary file is left
    expect(readProfileFolder(f.dir).dir).toBe(f.dir);
    expect(fs.readdirSync(f.dir).sort()).toEqual(['compile.json', 'profile.json']);
  });

  it('a missing, malformed or wrong file is a diagnostic naming the file and the place in it', () => {
    const dir = folder('bad');
    const engine = path.join(dir, 'inference', 'profile.json');
    fs.writeFileSync(engine, '{"format": "poplar-host-profile", ');
    expect(failure(() => readProfileFolder(dir))).toContain(`${engine}: not valid JSON`);
    const broken = engineProfile();
    ((broken['execution'] as { lastRun: { steps: { seconds: number }[] } }).lastRun.steps[1]!).seconds = -1;
    writeJsonAtomic(engine, broken);
    expect(failure(() => readEngineProfile(engine))).toContain(`${engine}: execution.lastRun.steps[1].seconds: expected a non-negative number, found -1`);
    writeJsonAtomic(engine, { ...engineProfile(), format: 'something else' });
    expect(failure(() => readEngineProfile(engine))).toContain(`${engine}: format: expected "poplar-host-profile"`);
    writeJsonAtomic(engine, { ...engineProfile(), version: 2 });
    expect(failure(() => readEngineProfile(engine))).toContain('newer than this tilegraph reads');
    const steps = engineProfile();
    (steps['steps'] as { children?: number[] }[])[0]!.children = [7];
    writeJsonAtomic(engine, steps);
    expect(failure(() => readEngineProfile(engine))).toContain('steps[0].children: names a step that does not exist');
    fs.rmSync(engine);
    expect(failure(() => readProfileFolder(dir))).toContain(`${engine}: missing`);
    const compile = path.join(dir, 'inference', 'compile.json');
    writeJsonAtomic(compile, { ...compileProfile(), kind: 'both' });
    expect(failure(() => readCompileProfile(compile))).toContain(`${compile}: kind: expected "training" or "inference"`);
  });

  it('a folder without profiles, or with several models, says so', () => {
    expect(failure(() => readProfileFolder(path.join(tmp, 'none')))).toContain('no such profile folder');
    fs.mkdirSync(path.join(tmp, 'empty'));
    expect(failure(() => readProfileFolder(path.join(tmp, 'empty')))).toContain('not a profile folder');
    const two = folder('two');
    writeJsonAtomic(path.join(two, 'training', 'compile.json'), { ...compileProfile(), kind: 'training' });
    expect(failure(() => readProfileFolder(two))).toContain('several models: inference, training');
    expect(readProfileFolder(two, 'inference').dir).toBe(path.join(two, 'inference'));
  });
});

describe('the engine options of a profiled model', () => {
  it('nothing unless enableProfiling, logCycleCount or POPLAR_ENGINE_OPTIONS asks', () => {
    expect(profilePlan(new Options(), 'training', {})).toBeUndefined();
    expect(profilePlan(new Options(), 'training', { POPLAR_ENGINE_OPTIONS: '{"debug.allowOutOfMemory": true}' })).toBeUndefined();
  });

  it('enableProfiling: autoReport into <dir>/<modelName>, absolute', () => {
    const p = profilePlan(new Options().enableProfiling('prof'), 'training', {})!;
    expect(p).toEqual({ dir: path.resolve('prof', 'training'), requested: true, engineOptions: { 'autoReport.all': 'true', 'autoReport.directory': path.resolve('prof', 'training') } });
    // a model name is one folder, whatever it holds
    expect(profilePlan(new Options().enableProfiling('prof').modelName('../a/b'), 'inference', {})!.dir).toBe(path.resolve('prof', '.._a_b'));
  });

  it('POPLAR_ENGINE_OPTIONS turns profiling on, and its options are kept over enableProfiling', () => {
    const env = { POPLAR_ENGINE_OPTIONS: JSON.stringify({ 'autoReport.all': true, 'autoReport.directory': 'rep', 'debug.allowOutOfMemory': 'true' }) };
    const p = profilePlan(new Options(), 'inference', env)!;
    expect(p.requested).toBe(true);
    expect(p.engineOptions).toEqual({ 'autoReport.all': 'true', 'autoReport.directory': path.resolve('rep', 'inference'), 'debug.allowOutOfMemory': 'true' });
    const q = profilePlan(new Options().enableProfiling('mine'), 'inference', { POPLAR_ENGINE_OPTIONS: '{"autoReport.all": "false"}' })!;
    expect(q.engineOptions['autoReport.all']).toBe('false');
    expect(q.dir).toBe(path.resolve('mine', 'inference'));
  });

  it('logCycleCount alone: the runs measured into a private folder, removed afterwards', () => {
    const p = profilePlan(new Options().logCycleCount(true), 'training', {})!;
    expect(p.requested).toBe(false);
    expect(p.engineOptions['autoReport.outputExecutionProfile']).toBe('true');
    expect(fs.existsSync(p.dir)).toBe(true);
    disposeProfilePlan(p);
    expect(fs.existsSync(p.dir)).toBe(false);
  });

  it('a malformed POPLAR_ENGINE_OPTIONS is a diagnostic', () => {
    expect(parseEngineOptions('{"a": 1, "b": true, "c": "x"}')).toEqual({ a: '1', b: 'true', c: 'x' });
    expect(failure(() => parseEngineOptions('{"a": '))).toContain('POPLAR_ENGINE_OPTIONS is not valid JSON');
    expect(failure(() => parseEngineOptions('[1]'))).toContain('must be a JSON object');
    expect(failure(() => parseEngineOptions('{"a": {"b": 1}}'))).toContain('the value of "a"');
  });
});

describe("PopTorch's latencies from the perf counters", () => {
  const p = perfCounterLists({
    inputStreams: ['in0', 'in1'],
    input: [
      [1, 11],
      [1.5, 10.5],
    ],
    input_complete: [
      [2, 12],
      [2.5, 12.5],
    ],
    outputStreams: ['out0'],
    output: [[5, 17]],
    output_complete: [[6, 18]],
  });

  it('are [min, max, mean] over the iterations', () => {
    // round trip: first input requested (1, 10.5) to the last output written back (6, 18)
    expect(latency(p)).toEqual([5, 7.5, 6.25]);
    expect(hostIpuLatency(p)).toEqual([1.5, 2, 1.75]);
    expect(computeLatency(p)).toEqual([2.5, 4.5, 3.5]);
    expect(ipuHostLatency(p)).toEqual([1, 1, 1]);
  });

  it('group the starts of several iterations ending in one output, and give zeros when nothing was copied', () => {
    const q = perfCounterLists({ inputStreams: ['in0'], input: [[1, 2, 3, 4]], input_complete: [[1, 2, 3, 4]], outputStreams: ['out0'], output: [[3, 5]], output_complete: [[3.5, 6]] });
    expect(latency(q)).toEqual([2.5, 3, 2.75]);
    const none = perfCounterLists({ inputStreams: [], input: [], input_complete: [], outputStreams: [], output: [], output_complete: [] });
    expect(none.input).toEqual([[]]);
    expect(latency(none)).toEqual([0, 0, 0]);
  });
});
