import * as fs from 'node:fs';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import {
  DecodedTensor,
  OnnxUnsupportedError,
  decodeModel,
  decodeTensor,
  importOnnx,
  int64,
  tensorFromProto,
} from '@tilegraph/frontend';
import { DiagnosticError, Graph, Tensor, isFloat } from '@tilegraph/ir';
import { runGraph } from '@tilegraph/runtime';

/**
 * The ONNX backend-test conformance harness: each test folder holds model.onnx and
 * test_data_set_N/{input,output}_K.pb (TensorProto). A test is imported, run through the
 * reference interpreter and compared with the expected outputs.
 */

export type TestStatus = 'passed' | 'failed' | 'unsupported';

export interface TestResult {
  readonly name: string;
  readonly status: TestStatus;
  /** Why it failed or is unsupported (first diagnostic, or the first mismatch). */
  readonly reason?: string;
  /** ONNX op types the model uses (domain-qualified outside the default domain). */
  readonly ops: readonly string[];
  readonly opset?: number;
  /** Set when outputs come from random ops and only shapes and dtypes were compared. */
  readonly shapeOnly?: boolean;
  /** Inputs fixed at import (shape-deciding inputs such as axes), from the test's first data set. */
  readonly frozenInputs?: readonly string[];
  /** Data-dependent output sizes (maxOutputs keys) bounded by the size of the expected output. */
  readonly boundedOutputs?: readonly string[];
  readonly ms: number;
}

export const FLOAT_RTOL = 1e-3;
export const FLOAT_ATOL = 1e-5;

/** Expected values: the IR tensor, plus exact values when they were narrowed (int64 beyond int32). */
interface Expected {
  readonly tensor: Tensor;
  readonly exact?: Float64Array;
  readonly float: boolean;
}

function expectedOf(d: DecodedTensor): Expected {
  // float types (FLOAT, FLOAT16, DOUBLE, BFLOAT16 and the float8/float4 formats) compare with
  // tolerance, NaN matching NaN; everything else exactly
  const float = isFloat(d.tensor.dtype);
  return d.wide ? { tensor: d.tensor, exact: d.wide, float } : { tensor: d.tensor, float };
}

/**
 * Compares one output; returns a description of the first mismatch, or undefined. Floats match
 * within |got - want| <= atol + rtol·|want|, NaN matches NaN, infinities match the same sign.
 */
export function compareOutput(name: string, want: Expected, got: Tensor, rtol = FLOAT_RTOL, atol = FLOAT_ATOL): string | undefined {
  const ws = want.tensor.shape;
  if (ws.length !== got.shape.length || ws.some((d, i) => d !== got.shape[i])) {
    return `output '${name}': shape [${got.shape.join(',')}], expected [${ws.join(',')}]`;
  }
  const w = want.exact ?? want.tensor.data;
  const g = got.data;
  let bad = 0;
  let first = -1;
  for (let i = 0; i < w.length; i++) {
    const x = g[i]!;
    const y = w[i]!;
    let ok: boolean;
    if (want.float) {
      if (Number.isNaN(y)) ok = Number.isNaN(x);
      else if (!Number.isFinite(y)) ok = x === y;
      else ok = Math.abs(x - y) <= atol + rtol * Math.abs(y);
    } else {
      ok = x === y;
    }
    if (!ok) {
      if (first < 0) first = i;
      bad++;
    }
  }
  if (bad === 0) return undefined;
  return `output '${name}': ${bad} of ${w.length} values differ; first at index ${first}: got ${g[first]}, expected ${w[first]}`;
}

function listPb(dir: string, prefix: string): string[] {
  return fs
    .readdirSync(dir)
    .filter((f) => f.startsWith(prefix) && f.endsWith('.pb'))
    .sort((a, b) => Number(a.slice(prefix.length, -3)) - Number(b.slice(prefix.length, -3)))
    .map((f) => path.join(dir, f));
}

function readPb(file: string): { decoded: DecodedTensor } {
  const t = decodeTensor(fs.readFileSync(file));
  return { decoded: tensorFromProto(t, path.basename(file)) };
}

/** IR ops whose results are random: their tests compare shapes and dtypes only. */
function usesRandomOps(g: Graph): boolean {
  return g.ops.some((o) => o.def.family === 'random' || o.kind === 'dropout' || o.kind.startsWith('random_'));
}

function firstLine(e: unknown): string {
  if (e instanceof DiagnosticError) return e.diagnostics.map((d) => d.message).join('; ');
  return e instanceof Error ? e.message : String(e);
}

function shapesWithout(shapes: Record<string, number[]>, frozen: Record<string, Tensor>): Record<string, number[]> {
  const out: Record<string, number[]> = {};
  for (const [k, v] of Object.entries(shapes)) if (!(k in frozen)) out[k] = v;
  return out;
}

/**
 * The size a data-dependent output has in a data set's expected outputs: dimension `axis` of
 * the first listed output that is a graph output (undefined when none is).
 */
function expectedBound(dir: string, outputNames: readonly string[], outputs: readonly { name: string; axis: number }[]): number | undefined {
  for (const o of outputs) {
    const k = outputNames.indexOf(o.name);
    const file = path.join(dir, `output_${k}.pb`);
    if (k < 0 || !fs.existsSync(file)) continue;
    const size = readPb(file).decoded.tensor.shape[o.axis];
    if (size !== undefined) return size;
  }
  return undefined;
}

/** Runs one test folder in this thread. Never throws: every problem is a result. */
export function runConformanceTest(testDir: string): TestResult {
  const start = Date.now();
  const name = path.basename(testDir);
  let ops: string[] = [];
  let opset: number | undefined;
  const done = (status: TestStatus, reason?: string, extra: Partial<TestResult> = {}): TestResult => ({
    name,
    status,
    ...(reason !== undefined ? { reason } : {}),
    ops,
    ...(opset !== undefined ? { opset } : {}),
    ...extra,
    ms: Date.now() - start,
  });
  try {
    const bytes = fs.readFileSync(path.join(testDir, 'model.onnx'));
    const model = decodeModel(bytes);
    const g = model.graph ?? {};
    ops = [...new Set((g.node ?? []).map((n) => (n.domain && n.domain !== 'ai.onnx' ? `${n.domain}.${n.opType}` : n.opType ?? '')))].sort();
    for (const o of model.opsetImport ?? []) if (!o.domain || o.domain === 'ai.onnx') opset = int64(o.version);
    const inits = new Set((g.initializer ?? []).map((t) => t.name));
    const graphInputs = (g.input ?? []).filter((v) => !inits.has(v.name ?? ''));
    const inputNames = graphInputs.map((v) => v.name ?? '');
    const notTensor = graphInputs.find((v) => !v.type?.tensorType);
    if (notTensor) return done('unsupported', `graph input '${notTensor.name}' is not a tensor (sequence, optional or map)`);
    const notTensorOut = (g.output ?? []).find((v) => v.type && !v.type.tensorType);
    if (notTensorOut) return done('unsupported', `graph output '${notTensorOut.name}' is not a tensor (sequence, optional or map)`);
    const outputNames = (g.output ?? []).map((v) => v.name ?? '');

    const sets = fs
      .readdirSync(testDir)
      .filter((f) => f.startsWith('test_data_set_'))
      .sort()
      .map((f) => path.join(testDir, f));
    if (sets.length === 0) return done('failed', 'no test_data_set_* folder');

    // shapes of the first data set fix the symbolic dimensions
    const loadInputs = (dir: string): Record<string, Tensor> => {
      const files = listPb(dir, 'input_');
      if (files.length !== inputNames.length) throw new Error(`${path.basename(dir)} has ${files.length} inputs but the model takes ${inputNames.length}`);
      const feeds: Record<string, Tensor> = {};
      files.forEach((f, k) => (feeds[inputNames[k]!] = readPb(f).decoded.tensor));
      return feeds;
    };
    let firstFeeds: Record<string, Tensor>;
    try {
      firstFeeds = loadInputs(sets[0]!);
    } catch (e) {
      if (e instanceof OnnxUnsupportedError) return done('unsupported', firstLine(e));
      // inputs that are not TensorProto (sequences, optionals) decode as garbage or not at all
      return done('unsupported', `test inputs are not plain tensors: ${firstLine(e)}`);
    }
    const inputShapes: Record<string, number[]> = {};
    for (const [k, t] of Object.entries(firstFeeds)) inputShapes[k] = [...t.shape];

    // inputs that decide shapes are fixed to the first data set's values when the importer asks
    // and data-dependent output sizes are bounded by the size of the expected output
    let graph: Graph | undefined;
    const frozen: Record<string, Tensor> = {};
    const maxOutputs: Record<string, number> = {};
    for (let attempt = 0; graph === undefined; attempt++) {
      try {
        graph = importOnnx(bytes, { file: 'model.onnx', modelDir: testDir, inputShapes: shapesWithout(inputShapes, frozen), constantInputs: frozen, maxOutputs }).graph;
      } catch (e) {
        if (e instanceof OnnxUnsupportedError) {
          const more = e.needsConstantInputs.filter((n) => !(n in frozen) && n in firstFeeds);
          if (more.length > 0 && attempt < inputNames.length) {
            for (const n of more) frozen[n] = firstFeeds[n]!;
            continue;
          }
          const bound = e.needsOutputBound && !(e.needsOutputBound.key in maxOutputs) ? expectedBound(sets[0]!, outputNames, e.needsOutputBound.outputs) : undefined;
          if (bound !== undefined && attempt < inputNames.length + outputNames.length) {
            maxOutputs[e.needsOutputBound!.key] = bound;
            continue;
          }
          return done('unsupported', firstLine(e));
        }
        return done('failed', `import: ${firstLine(e)}`);
      }
    }
    const frozenNames = Object.keys(frozen);
    if (frozenNames.length > 0 && sets.length > 1) {
      // later data sets must feed the same values to the frozen inputs
      for (const dir of sets.slice(1)) {
        const feeds = loadInputs(dir);
        for (const n of frozenNames) {
          if (compareOutput(n, { tensor: frozen[n]!, float: false }, feeds[n]!)) return done('unsupported', `input '${n}' decides a shape and differs between data sets`);
        }
      }
    }
    const shapeOnly = usesRandomOps(graph);

    for (const dir of sets) {
      const feeds = dir === sets[0] ? { ...firstFeeds } : loadInputs(dir);
      for (const n of frozenNames) delete feeds[n];
      const want = listPb(dir, 'output_').map((f) => {
        return expectedOf(readPb(f).decoded);
      });
      if (want.length !== outputNames.length) return done('failed', `${path.basename(dir)} has ${want.length} outputs but the model has ${outputNames.length}`);
      let outputs: Record<string, Tensor>;
      try {
        outputs = runGraph(graph, feeds, { print: () => {} }).outputs;
      } catch (e) {
        return done('failed', `run: ${firstLine(e)}`);
      }
      for (let k = 0; k < want.length; k++) {
        const got = outputs[outputNames[k]!]!;
        const w = want[k]!;
        if (shapeOnly) {
          const sameShape = got.shape.length === w.tensor.shape.length && got.shape.every((dd, i) => dd === w.tensor.shape[i]);
          if (!sameShape || isFloat(got.dtype) !== w.float) {
            return done('failed', `output '${outputNames[k]}': ${got.dtype}[${got.shape.join(',')}], expected ${w.tensor.dtype}[${w.tensor.shape.join(',')}]`);
          }
          continue;
        }
        const problem = compareOutput(outputNames[k]!, w, got);
        if (problem) return done('failed', `${path.basename(dir)}: ${problem}`);
      }
    }
    const bounded = Object.keys(maxOutputs);
    return done('passed', undefined, {
      ...(shapeOnly ? { shapeOnly: true } : {}),
      ...(frozenNames.length ? { frozenInputs: frozenNames } : {}),
      ...(bounded.length ? { boundedOutputs: bounded } : {}),
    });
  } catch (e) {
    if (e instanceof OnnxUnsupportedError) return done('unsupported', firstLine(e));
    return done('failed', firstLine(e));
  }
}

/** Test folders under `dir` (those holding a model.onnx) whose name contains `filter`. */
export function listConformanceTests(dir: string, filter?: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && (!filter || e.name.includes(filter)))
    .map((e) => path.join(dir, e.name))
    .filter((d) => fs.existsSync(path.join(d, 'model.onnx')))
    .sort();
}

export interface RunAllOptions {
  /** Worker threads running tests side by side. */
  jobs?: number;
  /** Per-test limit in milliseconds: a test running longer is stopped and failed. */
  timeoutMs?: number;
  /** Heap limit per worker (MB), so one runaway test cannot take the machine's memory. */
  maxHeapMb?: number;
  onResult?: (r: TestResult, done: number, total: number) => void;
}

/**
 * Runs tests in worker threads, each under a time limit: a test that overruns (or crashes its
 * worker) is failed and its worker replaced, so nothing can hang the harness.
 */
export async function runConformanceTests(tests: readonly string[], opts: RunAllOptions = {}): Promise<TestResult[]> {
  const jobs = Math.max(1, Math.min(opts.jobs ?? 1, tests.length || 1));
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const workerUrl = new URL('./worker.js', import.meta.url);
  const results: TestResult[] = new Array(tests.length);
  let next = 0;
  let finished = 0;

  const spawn = (): Worker => new Worker(workerUrl, { resourceLimits: { maxOldGenerationSizeMb: opts.maxHeapMb ?? 4096 } });

  const lane = async (): Promise<void> => {
    let worker: Worker | undefined;
    while (next < tests.length) {
      const i = next++;
      const dir = tests[i]!;
      worker ??= spawn();
      const w = worker;
      const started = Date.now();
      const r = await new Promise<TestResult>((resolve) => {
        const fail = (why: string) => {
          cleanup();
          worker = undefined;
          void w.terminate();
          resolve({ name: path.basename(dir), status: 'failed', reason: why, ops: [], ms: Date.now() - started });
        };
        const timer = setTimeout(() => fail(`timed out after ${timeoutMs / 1000} s`), timeoutMs);
        const onMessage = (m: TestResult) => {
          cleanup();
          resolve(m);
        };
        const onError = (e: Error) => fail(`worker crashed: ${e.message}`);
        const onExit = (code: number) => fail(`worker exited with code ${code}`);
        const cleanup = () => {
          clearTimeout(timer);
          w.off('message', onMessage);
          w.off('error', onError);
          w.off('exit', onExit);
        };
        w.on('message', onMessage);
        w.on('error', onError);
        w.on('exit', onExit);
        w.postMessage({ dir });
      });
      results[i] = r;
      finished++;
      opts.onResult?.(r, finished, tests.length);
    }
    if (worker) await worker.terminate();
  };
  await Promise.all(Array.from({ length: jobs }, () => lane()));
  return results;
}

export interface OpRow {
  tests: number;
  passed: number;
  failed: number;
  unsupported: number;
}

export interface ConformanceReport {
  readonly dir: string;
  readonly date: string;
  readonly counts: { total: number; passed: number; failed: number; unsupported: number; shapeOnly: number; frozenInputs: number; boundedOutputs: number };
  readonly byOp: Record<string, OpRow>;
  readonly tests: readonly TestResult[];
}

export function summarize(dir: string, results: readonly TestResult[]): ConformanceReport {
  const counts = { total: results.length, passed: 0, failed: 0, unsupported: 0, shapeOnly: 0, frozenInputs: 0, boundedOutputs: 0 };
  const byOp: Record<string, OpRow> = {};
  for (const r of results) {
    counts[r.status]++;
    if (r.shapeOnly) counts.shapeOnly++;
    if (r.status === 'passed' && r.frozenInputs?.length) counts.frozenInputs++;
    if (r.status === 'passed' && r.boundedOutputs?.length) counts.boundedOutputs++;
    for (const op of r.ops) {
      const row = (byOp[op] ??= { tests: 0, passed: 0, failed: 0, unsupported: 0 });
      row.tests++;
      row[r.status]++;
    }
  }
  const sorted: Record<string, OpRow> = {};
  for (const k of Object.keys(byOp).sort()) sorted[k] = byOp[k]!;
  return { dir, date: new Date().toISOString(), counts, byOp: sorted, tests: results };
}

/** The printed summary: counts, a by-op table and the failing tests with their reasons. */
export function formatReport(rep: ConformanceReport, opts: { failures?: boolean; byOp?: boolean } = {}): string {
  const lines: string[] = [];
  if (opts.byOp ?? true) {
    const w = Math.max(4, ...Object.keys(rep.byOp).map((k) => k.length));
    lines.push(`${'op'.padEnd(w)}  tests  passed  failed  unsupported`);
    for (const [op, r] of Object.entries(rep.byOp)) {
      lines.push(`${op.padEnd(w)}  ${String(r.tests).padStart(5)}  ${String(r.passed).padStart(6)}  ${String(r.failed).padStart(6)}  ${String(r.unsupported).padStart(11)}`);
    }
    lines.push('');
  }
  if (opts.failures ?? true) {
    const failed = rep.tests.filter((t) => t.status === 'failed');
    if (failed.length) {
      lines.push(`failed tests:`);
      for (const t of failed) lines.push(`  ${t.name}: ${(t.reason ?? '').split('\n')[0]!.slice(0, 300)}`);
      lines.push('');
    }
  }
  const c = rep.counts;
  if (c.shapeOnly) lines.push(`${c.shapeOnly} passed tests use random ops: their shapes and dtypes were compared, not their values`);
  if (c.frozenInputs) lines.push(`${c.frozenInputs} passed tests had shape-deciding inputs (axes, sizes, ...) fixed at import from their data`);
  if (c.boundedOutputs) lines.push(`${c.boundedOutputs} passed tests had data-dependent output sizes bounded (maxOutputs) by the size of their expected outputs`);
  lines.push(`conformance: ${c.passed} passed, ${c.failed} failed, ${c.unsupported} unsupported of ${c.total} tests`);
  return lines.join('\n');
}
