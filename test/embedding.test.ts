import { jest } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ModelBuilder, Options } from '@tilegraph/frontend';
import { DiagnosticError, Graph, Tensor, tensorsIdentical } from '@tilegraph/ir';
import { makeOptimizer } from '@tilegraph/passes';
import { ExecutorSettings, TrainingModel, referenceBackend, resolveCacheDir, trainingModel } from '@tilegraph/runtime';
import { ROOT } from './support/cli.js';

/**
 * The API for programs that embed tilegraph: compileAsync and runAsync leave the event loop free,
 * dispose ends the executable, inputs may be typed or nested arrays and are checked before any
 * build, and an embedding program ends by itself.
 */

jest.setTimeout(15 * 60 * 1000);

const BATCH = 4;
/** 2 device iterations × 2 accumulation steps of 4 samples. */
const SAMPLES = BATCH * 2 * 2;

/** A small classifier; `hidden` changes the generated C++, so each width is a build of its own. */
function mlp(hidden: number): Graph {
  const m = new ModelBuilder('mlp');
  const x = m.input('x', 'float32', [BATCH, 16]);
  const y = m.input('y', 'int32', [BATCH]);
  const logits = m.output('logits', m.linear(m.relu(m.linear(x, 16, hidden, { name: 'fc1' })), hidden, 10, { name: 'fc2' }));
  m.loss(m.crossEntropy(logits, y));
  return m.graph;
}

function model(hidden: number, cacheDir: string | undefined, settings: ExecutorSettings = {}): TrainingModel {
  const opts = new Options().deviceIterations(2).randomSeed(3);
  opts.Training.gradientAccumulation(2);
  if (cacheDir) opts.enableExecutableCaching(cacheDir);
  return trainingModel(mlp(hidden), opts, makeOptimizer('Adam', { lr: 1e-2 }), settings);
}

/** One run's inputs as typed arrays (what an embedding program is likely to hold). */
function arrays(seed: number): { x: Float32Array; y: Int32Array } {
  return {
    x: Float32Array.from({ length: SAMPLES * 16 }, (_, i) => Math.sin(seed * 1000 + i)),
    y: Int32Array.from({ length: SAMPLES }, (_, i) => (seed + i * 7) % 10),
  };
}

const temps: string[] = [];
afterAll(() => {
  for (const d of temps) fs.rmSync(d, { recursive: true, force: true });
});

/**
 * A new, private executable cache folder. The emulation library (libpoplar_host.a) is copied from
 * the suite's cache when it is there, so only the models' own executables are built.
 */
function freshCache(withLibrary = true): string {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-embedding-'));
  temps.push(parent);
  const dir = path.join(parent, 'cache');
  if (!withLibrary) return dir;
  fs.mkdirSync(dir, { mode: 0o700 });
  const suite = resolveCacheDir();
  if (fs.existsSync(suite)) {
    for (const e of fs.readdirSync(suite)) if (e.startsWith('poplar-host-') || e.startsWith('tilegraph-host-')) fs.cpSync(path.join(suite, e), path.join(dir, e), { recursive: true });
  }
  return dir;
}

/** A copy of a cache folder (its library and executables), so the processes started from it are this test's alone. */
function copyCache(from: string): string {
  const dir = freshCache(false);
  fs.cpSync(from, dir, { recursive: true });
  return dir;
}

function executables(dir: string): string[] {
  return fs.existsSync(dir) ? fs.readdirSync(dir).filter((e) => e.startsWith('exe-')) : [];
}

/** Processes whose command line names a file under `dir` (a step executable, a compiler building there). */
function processesUsing(dir: string): number[] {
  const out: number[] = [];
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      if (fs.readFileSync(`/proc/${e}/cmdline`, 'latin1').includes(dir)) out.push(Number(e));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

async function until(what: string, cond: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** What `f` throws (or rejects with). */
async function failure(f: () => unknown): Promise<Error> {
  try {
    await f();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a failure');
}

function expectIdentical(got: Record<string, Tensor>, want: Record<string, Tensor>): void {
  expect(Object.keys(got).sort()).toEqual(Object.keys(want).sort());
  for (const k of Object.keys(want)) expect([k, tensorsIdentical(got[k]!, want[k]!)]).toEqual([k, true]);
}

/** The cache that the compiled tests share: the 32-wide model is built there by the first test. */
let shared: string;
beforeAll(() => {
  shared = freshCache();
});

describe('compileAsync and runAsync do not block the event loop', () => {
  test('a timer keeps firing while compileAsync builds; while compile() builds it does not fire at all', async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    try {
      const before = executables(shared).length;
      const a = model(32, shared);
      await a.compileAsync();
      // a real build (a new cache entry), during which the timer ran many times
      expect(executables(shared).length).toBe(before + 1);
      expect(ticks).toBeGreaterThanOrEqual(10);
      a.dispose();

      const b = model(24, shared);
      ticks = 0;
      b.compile();
      // read before anything else can run: a blocking build gives the timer no turn at all
      const during = ticks;
      expect(executables(shared).length).toBe(before + 2);
      expect(during).toBe(0);
      b.dispose();
    } finally {
      clearInterval(timer);
    }
  });

  test('runAsync returns what run returns, bit for bit, on the compiled backend', async () => {
    const sync = model(32, shared);
    const async_ = model(32, shared);
    try {
      for (let step = 0; step < 2; step++) {
        const inputs = arrays(step);
        expectIdentical(await async_.runAsync(inputs), sync.run(inputs));
      }
      expectIdentical(async_.stateDict(), sync.stateDict());
    } finally {
      sync.dispose();
      async_.dispose();
    }
  });

  test('runAsync returns what run returns, bit for bit, on the reference backend', async () => {
    const sync = model(32, undefined, { backend: referenceBackend });
    const async_ = model(32, undefined, { backend: referenceBackend });
    for (let step = 0; step < 2; step++) {
      const inputs = arrays(step);
      expectIdentical(await async_.runAsync(inputs), sync.run(inputs));
    }
    expectIdentical(async_.stateDict(), sync.stateDict());
  });

  test('one call at a time: a call while runAsync is under way is refused, and the model works on afterwards', async () => {
    const m = model(32, undefined, { backend: referenceBackend });
    const pending = m.runAsync(arrays(0));
    expect(() => m.run(arrays(1))).toThrow(/run: runAsync\(\) on this model has not finished/);
    expect(() => m.stateDict()).toThrow(/stateDict: runAsync\(\) on this model has not finished/);
    await expect(m.runAsync(arrays(1))).rejects.toThrow(/runAsync: runAsync\(\) on this model has not finished/);
    await expect(m.compileAsync()).rejects.toThrow(/compileAsync: runAsync\(\) on this model has not finished/);
    expect((await pending)['loss']!.shape).toEqual([]);
    expect(m.run(arrays(1))['loss']!.shape).toEqual([]);
  });
});

describe('dispose', () => {
  test('ends the step process; later calls say the model was disposed; a second dispose does nothing', async () => {
    const dir = copyCache(shared);
    const m = model(32, dir);
    await m.runAsync(arrays(0));
    expect(processesUsing(dir)).toHaveLength(1);
    m.dispose();
    await until('the step process is gone', () => processesUsing(dir).length === 0, 10_000);
    expect(m.isDisposed).toBe(true);
    expect(m.isCompiled).toBe(false);
    expect(() => m.run(arrays(1))).toThrow(/run: the model was disposed/);
    expect(() => m.stateDict()).toThrow(/stateDict: the model was disposed/);
    expect(() => m.compile()).toThrow(/compile: the model was disposed/);
    await expect(m.runAsync(arrays(1))).rejects.toThrow(/runAsync: the model was disposed/);
    await expect(m.compileAsync()).rejects.toThrow(/compileAsync: the model was disposed/);
    expect(() => m.dispose()).not.toThrow();
  });

  test('a runAsync under way rejects with the disposed error and leaves no process', async () => {
    const dir = copyCache(shared);
    const m = model(32, dir);
    m.compile();
    // disposed before the step is sent (a request already waiting is covered in drive.test.ts)
    const pending = m.runAsync(arrays(0));
    m.dispose();
    await expect(pending).rejects.toThrow(/runAsync\(\): the model was disposed/);
    await until('the step process is gone', () => processesUsing(dir).length === 0, 10_000);
  });

  test('a compileAsync under way is abandoned: its build is stopped and its folder removed', async () => {
    const dir = freshCache();
    const m = model(20, dir);
    const compiling = m.compileAsync();
    const rejected = expect(compiling).rejects.toThrow(/compileAsync\(\): the model was disposed/);
    await until('a compiler runs in the build folder', () => processesUsing(path.join(dir, '.build-')).length > 0, 120_000);
    m.dispose();
    await rejected;
    await until('no compiler is left', () => processesUsing(dir).length === 0, 15_000);
    await until('the build folder is removed', () => !fs.readdirSync(dir).some((e) => e.startsWith('.build-')), 15_000);
    expect(executables(dir)).toEqual([]);
  });
});

describe('inputs', () => {
  test('typed arrays, flat and nested number arrays give what Tensors give', () => {
    const { x, y } = arrays(5);
    const nested = { x: Array.from({ length: SAMPLES }, (_, i) => Array.from(x.subarray(i * 16, (i + 1) * 16))), y: Array.from(y) };
    const asTensors = { x: new Tensor('float32', [SAMPLES, 16], x.slice()), y: new Tensor('int32', [SAMPLES], y.slice()) };
    const runs = [asTensors, { x, y }, nested, { x: Array.from(x), y: Array.from(y) }].map((inputs) => {
      const m = model(32, undefined, { backend: referenceBackend });
      return { out: m.run(inputs), weights: m.stateDict() };
    });
    for (const r of runs.slice(1)) {
      expectIdentical(r.out, runs[0]!.out);
      expectIdentical(r.weights, runs[0]!.weights);
    }
  });

  test('a wrong input is a diagnostic naming it, given before anything is compiled or built', async () => {
    const dir = freshCache(false);
    const m = model(32, dir);
    const { x, y } = arrays(0);
    const cases: [string, unknown, RegExp][] = [
      ['short typed array', { x: x.subarray(1), y }, /input 'x': expected float32\[16,16\] \(4 micro-batches of float32\[4,16\]\) but got a Float32Array of 255 elements/],
      ['wrong element type', { x: Float64Array.from(x), y }, /input 'x': expected float32\[16,16\].* but got a Float64Array of 256 elements[^]*a float32 input takes a Float32Array/],
      ['labels as floats', { x, y: Float32Array.from(y) }, /input 'y': expected int32\[16\].* but got a Float32Array/],
      ['missing input', { x }, /input 'y' \(4 micro-batches of int32\[4\]\) was not given: a run takes int32\[16\]/],
      ['unknown input', { x, y, z: x }, /the model has no input named 'z' \(inputs: x, y\)/],
      ['no inputs at all', undefined, /run: no inputs were given[^]*the model takes 'x', 'y'/],
      ['a tensor as the inputs', new Tensor('float32', [1], new Float32Array(1)), /the inputs must be an object .* got a Tensor float32\[1\]/],
      ['a string', { x: 'data.npy', y }, /input 'x': expected float32\[16,16\].* but got a string/],
      ['a tensor of the wrong shape', { x: new Tensor('float32', [4, 16], x.subarray(0, 64)), y }, /input 'x': expected float32\[16,16\].* but got float32\[4,16\]/],
      ['a ragged nested array', { x: [...Array.from({ length: 15 }, () => Array(16).fill(0)), Array(15).fill(0)], y }, /input 'x': .* a nested array whose x\[15\] has 15 elements, not 16/],
      ['a fractional label', { x, y: [...Array(15).fill(0), 2.5] }, /input 'y': .* but got 2\.5 at position 15[^]*int32 elements are integers/],
      ['a label out of range', { x, y: Int32Array.from(y, (v, i) => (i === 3 ? 10 : v)) }, /input 'y': label 10 at position 3 is not a class index in \[0, 10\)/],
      ['a null element', { x: [...Array(255).fill(0), null], y }, /input 'x': .* but got null at position 255[^]*the elements must be numbers/],
      ['a sparse array', { x: new Array(256), y }, /input 'x': .* but got undefined at position 0/],
    ];
    for (const [what, inputs, message] of cases) {
      for (const call of [() => m.run(inputs as never), () => m.runAsync(inputs as never)]) {
        const e = await failure(call);
        expect([what, e instanceof DiagnosticError, e.message]).toEqual([what, true, expect.stringMatching(message)]);
      }
    }
    // nothing was compiled, and no build began (the cache folder is made by the first build)
    expect(m.isCompiled).toBe(false);
    expect(fs.existsSync(dir)).toBe(false);
  });
});

test('a program that embeds a model ends by itself, and its step processes with it', async () => {
  // the program below finds this model's executable in its copy of the cache
  const m = model(32, shared);
  m.compile();
  m.dispose();
  const dir = copyCache(shared);
  const built = executables(dir);
  expect(built.length).toBeGreaterThan(0);
  const script = String.raw`
    import { ModelBuilder, Options } from '@tilegraph/frontend';
    import { makeOptimizer } from '@tilegraph/passes';
    import { trainingModel } from '@tilegraph/runtime';
    const m = new ModelBuilder('mlp');
    const x = m.input('x', 'float32', [4, 16]);
    const y = m.input('y', 'int32', [4]);
    const logits = m.output('logits', m.linear(m.relu(m.linear(x, 16, 32, { name: 'fc1' })), 32, 10, { name: 'fc2' }));
    m.loss(m.crossEntropy(logits, y));
    const make = () => {
      const opts = new Options().deviceIterations(2).randomSeed(3).enableExecutableCaching(process.env.EMBED_CACHE);
      opts.Training.gradientAccumulation(2);
      return trainingModel(m.graph, opts, makeOptimizer('Adam', { lr: 1e-2 }));
    };
    const inputs = { x: new Float32Array(16 * 16).fill(0.5), y: new Int32Array(16).fill(3) };
    const a = await make().runAsync(inputs);
    const b = make().run(inputs);
    // neither model is disposed, and nothing calls process.exit
    console.log(JSON.stringify({ async: a.loss.data[0], sync: b.loss.data[0] }));
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8', timeout: 180_000, env: { ...process.env, EMBED_CACHE: dir } });
  expect([r.error?.message, r.signal, r.status, r.stderr]).toEqual([undefined, null, 0, '']);
  const losses = JSON.parse(r.stdout) as { async: number; sync: number };
  expect(Number.isFinite(losses.async)).toBe(true);
  expect(losses.sync).toBe(losses.async);
  // the program used the executable it was given rather than building one
  expect(executables(dir)).toEqual(built);
  // its exit stopped the step processes (killed then, so allow a moment for them to go)
  await until('the step processes are gone', () => processesUsing(dir).length === 0, 5000);
});
