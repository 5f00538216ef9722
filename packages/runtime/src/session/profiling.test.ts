import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { jest } from '@jest/globals';
import { Graph, GraphBuilder } from '@tilegraph/ir';
import { Options } from '@tilegraph/frontend';
import { makeOptimizer } from '@tilegraph/passes';
import { InferenceModel, inferenceModel, trainingModel } from './models.js';
import { referenceBackend } from './backend.js';
import { randomTensor } from '../compiled/testing.js';
import { readProfileFolder } from '../profile/format.js';
import { thrownDiagnostic } from '../../../ir/src/testing/index.js';

/**
 * Profiling a model on the emulated IPU: the profile folder written at compile and after every
 * run and read back, cycleCount() with and without logCycleCount, the latencies' shape, and
 * POPLAR_ENGINE_OPTIONS turning it on. Measured times are only checked to be present and
 * consistent, never against the clock.
 */

jest.setTimeout(20 * 60 * 1000);

const ITERATIONS = 3;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tg-profiling-'));
const models: { dispose(): void }[] = [];
afterAll(() => {
  for (const m of models) m.dispose();
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** x[4,6] → tanh(x·w + b) → y, with a squared-error loss for training. */
function net(): Graph {
  const b = new GraphBuilder('net');
  const x = b.input('x', 'float32', [4, 6]);
  const label = b.input('label', 'float32', [4, 3]);
  const w = b.parameter('w', 'float32', [6, 3], { kind: 'init', fn: 'xavier_uniform', args: { seed: 1 } });
  const bias = b.parameter('b', 'float32', [3], { kind: 'init', fn: 'zeros', args: {} });
  const y = b.op('tanh', [b.op('add', [b.op('matmul', [x, w]), bias])]);
  b.output('y', y);
  const d = b.op('sub', [y, label]);
  b.op('identity_loss', [b.op('mul', [d, d])], { reduction: 'mean' });
  return b.graph;
}

/** One run's inputs: ITERATIONS micro-batches. */
function inputs(seed: number) {
  return { x: randomTensor('float32', [4 * ITERATIONS, 6], seed), label: randomTensor('float32', [4 * ITERATIONS, 3], seed + 1) };
}

function track<T extends { dispose(): void }>(m: T): T {
  models.push(m);
  return m;
}

const failure = thrownDiagnostic;

function expectLatency(l: readonly number[]): void {
  expect(l).toHaveLength(3);
  const [min, max, mean] = l as [number, number, number];
  expect(min).toBeGreaterThanOrEqual(0);
  expect(mean).toBeGreaterThanOrEqual(min);
  expect(max).toBeGreaterThanOrEqual(mean);
}

describe('a profiled inference model (enableProfiling, logCycleCount)', () => {
  const dir = path.join(tmp, 'inference-profile');
  let model: InferenceModel;

  beforeAll(() => {
    model = track(inferenceModel(net(), new Options().deviceIterations(ITERATIONS).enableProfiling(dir).logCycleCount(true).showCompilationProgressBar(false)));
    model.compile();
  });

  it('writes the compile profile and the graph part of the engine profile when compiled', () => {
    expect(model.profileDir).toBe(path.join(dir, 'inference'));
    const f = readProfileFolder(dir);
    expect(f.compile).toMatchObject({ model: 'net', kind: 'inference', modelName: 'inference', backend: 'compiled', options: { deviceIterations: ITERATIONS, logCycleCount: true } });
    expect(f.compile.memory?.ipus).toBe(1);
    expect(f.compile.estimate.cyclesPerRun).toBeGreaterThan(0);
    expect(f.compile.streams.map((s) => s.name)).toEqual(expect.arrayContaining(['x', 'y']));
    expect(f.engine.execution).toMatchObject({ runs: 0, lastRun: null });
    expect(f.engine.memory.tiles).toHaveLength(1472);
    expect(f.engine.computeSets.length).toBeGreaterThan(0);
  });

  it('adds each run to the engine profile: every compute set once per device iteration', () => {
    model.run(inputs(1));
    model.run(inputs(2));
    const f = readProfileFolder(dir);
    const ex = f.engine.execution!;
    expect(ex.runs).toBe(2);
    expect(ex.programRuns[0]).toBe(2);
    expect(ex.history.map((h) => h.run)).toEqual([1, 2]);
    const last = ex.lastRun!;
    expect(last.run).toBe(2);
    expect(last.computeSets.length).toBe(f.engine.computeSets.length);
    for (const c of last.computeSets) {
      expect(c.executions).toBe(ITERATIONS);
      expect(c.seconds).toBeGreaterThanOrEqual(0);
      expect(c.estimatedCycles).toBe(ITERATIONS * f.engine.computeSets.find((x) => x.id === c.id)!.estimatedCycles);
    }
    for (const c of ex.totals.computeSets) expect(c.executions).toBe(2 * ITERATIONS);
    // the run's time brackets its program's root step; its cycles include every compute set's
    const root = last.steps.find((s) => s.id === f.engine.programs[0])!;
    expect(root.executions).toBe(1);
    expect(root.seconds).toBeLessThanOrEqual(last.seconds);
    expect(last.estimatedCycles).toBeGreaterThanOrEqual(last.computeSets.reduce((n, c) => n + c.estimatedCycles, 0));
    // a copy of each input stream (x: 4×6 floats, label: 4×3) per iteration
    expect(last.hostToDevice).toMatchObject({ copies: 2 * ITERATIONS, bytes: ITERATIONS * (4 * 6 + 4 * 3) * 4 });
  });

  it('cycleCount() is the estimated cycles of the last run', () => {
    const last = readProfileFolder(dir).engine.execution!.lastRun!;
    expect(model.cycleCount()).toBe(last.estimatedCycles);
    expect(model.cycleCount()).toBeGreaterThan(0);
  });

  it('getPerfCounters() and the latencies, as PopTorch gives them', () => {
    const p = model.getPerfCounters();
    expect(p.input).toHaveLength(2); // the x and label streams
    p.input.forEach((l, i) => {
      expect(l).toHaveLength(ITERATIONS);
      l.forEach((t, k) => expect(p.input_complete[i]![k]).toBeGreaterThanOrEqual(t));
    });
    for (const l of p.output) expect(l).toHaveLength(ITERATIONS);
    for (const l of [model.getLatency(), model.getComputeLatency(), model.getHostIpuLatency(), model.getIpuHostLatency()]) expectLatency(l);
  });
});

describe('what the measurements need', () => {
  it('cycleCount() needs logCycleCount(true), as in PopTorch; the latencies need a profiled model', () => {
    const plain = track(inferenceModel(net(), new Options().showCompilationProgressBar(false)));
    expect(failure(() => plain.cycleCount())).toContain('cycle count logging is disabled');
    expect(failure(() => plain.getLatency())).toContain('run the model at least once');
    plain.run({ x: randomTensor('float32', [4, 6], 3), label: randomTensor('float32', [4, 3], 4) });
    expect(failure(() => plain.getLatency())).toContain('measured only when the model is profiled');
    expect(plain.profileDir).toBeUndefined();

    const profiled = track(inferenceModel(net(), new Options().enableProfiling(path.join(tmp, 'no-cycles')).showCompilationProgressBar(false)));
    profiled.run({ x: randomTensor('float32', [4, 6], 3), label: randomTensor('float32', [4, 3], 4) });
    expect(failure(() => profiled.cycleCount())).toContain('Options.logCycleCount(true)');
    expectLatency(profiled.getLatency());
  });

  it('logCycleCount(true) alone counts into a private folder: no profile folder is named', () => {
    const m = track(inferenceModel(net(), new Options().logCycleCount(true).showCompilationProgressBar(false)));
    m.run({ x: randomTensor('float32', [4, 6], 3), label: randomTensor('float32', [4, 3], 4) });
    expect(m.cycleCount()).toBeGreaterThan(0);
    expect(m.profileDir).toBeUndefined();
  });

  it('the reference interpreter measures nothing: the methods say they need the compiled backend', () => {
    const dir = path.join(tmp, 'reference');
    const m = track(inferenceModel(net(), new Options().logCycleCount(true).enableProfiling(dir), { backend: referenceBackend }));
    m.run({ x: randomTensor('float32', [4, 6], 3), label: randomTensor('float32', [4, 3], 4) });
    expect(failure(() => m.cycleCount())).toContain('needs the compiled backend');
    expect(failure(() => m.getPerfCounters())).toContain('needs the compiled backend');
    // the compile's profile is written, with a warning that the runs are not
    expect(fs.existsSync(path.join(dir, 'inference', 'compile.json'))).toBe(true);
    expect(fs.existsSync(path.join(dir, 'inference', 'profile.json'))).toBe(false);
    expect(m.warnings.some((w) => w.message.includes('measures nothing'))).toBe(true);
  });
});

describe('POPLAR_ENGINE_OPTIONS', () => {
  const saved = process.env['POPLAR_ENGINE_OPTIONS'];
  afterEach(() => {
    if (saved === undefined) delete process.env['POPLAR_ENGINE_OPTIONS'];
    else process.env['POPLAR_ENGINE_OPTIONS'] = saved;
  });

  it('turns profiling on as PopTorch documents: the model profile goes to autoReport.directory/<modelName>', () => {
    const dir = path.join(tmp, 'from-env');
    process.env['POPLAR_ENGINE_OPTIONS'] = JSON.stringify({ 'autoReport.all': 'true', 'autoReport.directory': dir });
    const m = track(trainingModel(net(), new Options().modelName('mine').showCompilationProgressBar(false), makeOptimizer('SGD', { lr: 0.1 })));
    m.run({ x: randomTensor('float32', [4, 6], 5), label: randomTensor('float32', [4, 3], 6) });
    m.run({ x: randomTensor('float32', [4, 6], 7), label: randomTensor('float32', [4, 3], 8) });
    expect(m.profileDir).toBe(path.join(dir, 'mine'));
    const f = readProfileFolder(dir);
    expect(f.compile.kind).toBe('training');
    expect(f.compile.passes.length).toBeGreaterThan(0);
    expect(f.engine.execution!.programRuns[0]).toBe(2);
    expect(f.engine.options['autoReport.directory']).toBe(path.join(dir, 'mine'));
    expectLatency(m.getLatency());
  });
});
