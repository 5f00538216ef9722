import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { GenerateOptions, generatePoplar, hostUnits } from '@tilegraph/codegen-poplar';
import { ExecutionStrategy, Liveness, ModelBuilder, Options, ParallelPhasedExecution, Phase, PipelineSchedule, PipelinedExecution, SerialPhasedExecution, ShardedExecution, TensorLocationSettings, compileModelSource, loadModelFile } from '@tilegraph/frontend';
import { DEVICE_DTYPES, Graph, Module } from '@tilegraph/ir';
import { DEFAULT_STEP, OptimizerType, buildInferenceModule, buildTrainingModule, makeOptimizer } from '@tilegraph/passes';
import { compileOptionsFrom, stepSettingsFrom } from '@tilegraph/runtime';
import { convModule, mlpModule } from '../../packages/codegen-poplar/src/testing/golden-modules.js';
import { arbitraryGraphRecipe, graphFromRecipe, stepOpKinds } from '../../packages/ir/src/testing/index.js';
import { CUSTOM_EXAMPLE, registerLeakyRelu } from './custom-ops.js';
import { targetedModule } from './poplar-api-cases.js';
import { narrowArithmeticCase, quantizedOnnxCase } from './narrow-int.js';
import { TRANSFORMER_DROPOUT } from './pipelined.js';

/**
 * The generated-C++ cases of test/poplar-api-check.test.ts and a driver for the shared Poplar API
 * check (../shared/poplar-api-check/check.sh): generated host.cpp / codelets.cpp pairs are
 * written to a folder, identical files checked once, and the rest checked in parallel batches
 * (check.sh takes many files; each host file costs one g++ compile).
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const KIT = path.resolve(ROOT, '../shared/poplar-api-check');
const EXAMPLES = path.join(ROOT, 'examples');
const GOLDEN = path.join(ROOT, 'test/golden');

export interface CppCase {
  readonly name: string;
  /** Builds the module and the generator options (throws what the passes or generator throw). */
  readonly make: () => { module: Module; opts?: GenerateOptions };
}

type Pipeline = 'training' | 'inference';

function step(g: Graph, pipeline: Pipeline, options = new Options(), optimizer: OptimizerType = 'SGD'): { module: Module; opts: GenerateOptions } {
  const settings = stepSettingsFrom(options);
  const module = pipeline === 'training' ? buildTrainingModule(g, settings, makeOptimizer(optimizer, { lr: 0.01 })).module : buildInferenceModule(g, settings);
  return { module, opts: compileOptionsFrom(options) };
}

function withStrategy(strategy: ExecutionStrategy, accumulation = 1): Options {
  const o = new Options();
  if (accumulation > 1) o.Training.gradientAccumulation(accumulation);
  return o.setExecutionStrategy(strategy);
}

const PHASED_MODEL = `import "std/nn.tg"
model phased(batch: int = 2, width: int = 64) {
  input x: f32[batch, width]
  input y: i32[batch]
  block "A" {
    let h = relu(linear(x, width, width) as a)
  }
  block "B" {
    let h = relu(linear(h, width, width) as b)
  }
  block "C" {
    output logits = linear(h, width, 4) as c
    loss = cross_entropy(logits, y)
  }
}`;

/** Fast-check graphs, as test/compiled-random-graphs.test.ts makes them, run sharded. */
function randomGraphCases(seed: number, count: number, zeroSizes: boolean): CppCase[] {
  const ops = stepOpKinds().filter((k) => !['variable', 'assign', 'ipu_print_tensor'].includes(k));
  const recipes = fc.sample(arbitraryGraphRecipe({ dtypes: DEVICE_DTYPES, ops, maxSteps: 16, zeroSizes }), { seed, numRuns: count });
  return recipes.map((r, i) => ({
    name: `random graph ${i} (fast-check seed ${seed}${zeroSizes ? ', zero sizes' : ''})`,
    make: () => ({
      module: buildInferenceModule(graphFromRecipe(r, { dtypes: DEVICE_DTYPES, ops }), {
        ...DEFAULT_STEP,
        execution: { kind: 'sharded', autoStage: 'same_as_ipu', stages: [], describe: 'ShardedExecution()' },
      }),
    }),
  }));
}

/** Every case: golden models, examples in each execution mode, targeted models, random graphs. */
export function apiCheckCases(randomCount = 20): CppCase[] {
  const cases: CppCase[] = [
    { name: 'golden codegen mlp', make: () => ({ module: mlpModule() }) },
    { name: 'golden codegen conv (replicated)', make: () => ({ module: convModule() }) },
    { name: 'targeted API-fix cases', make: () => ({ module: targetedModule().module }) },
    { name: '8- and 16-bit integers', make: () => ({ module: narrowArithmeticCase().module }) },
    { name: 'quantized ONNX (QuantizeLinear, DequantizeLinear, MatMulInteger)', make: () => ({ module: quantizedOnnxCase().module }) },
  ];
  const example = (name: string, args?: Record<string, number>) => loadModelFile(path.join(EXAMPLES, `${name}.tg`), args ? { args } : {});
  // indexing.tg and scopes.tg train nothing (no loss, or no parameter reaching it)
  for (const [name, pipelines] of [['indexing', ['inference']], ['scopes', ['inference']], ['serialize_matmul', ['training', 'inference']], ['std_mlp', ['training', 'inference']]] as const) {
    for (const p of pipelines) cases.push({ name: `test/golden/${name}.tg ${p}`, make: () => step(loadModelFile(path.join(GOLDEN, `${name}.tg`)), p) });
  }
  cases.push({
    name: 'test/golden/recompute/mlp.tg training, RecomputeAll',
    make: () => {
      const g = loadModelFile(path.join(GOLDEN, 'recompute/mlp.tg'));
      return { module: buildTrainingModule(g, { ...DEFAULT_STEP, recomputation: 'recomputeall' }, makeOptimizer('SGD', { lr: 0.1 })).module };
    },
  });
  cases.push({
    name: 'test/golden/locations/tiny.tg training, Adam state off chip',
    make: () => {
      const o = new Options();
      o.TensorLocations.setOptimizerLocation(new TensorLocationSettings().useOnChipStorage(false));
      return step(loadModelFile(path.join(GOLDEN, 'locations/tiny.tg')), 'training', o, 'Adam');
    },
  });
  for (const name of ['mlp', 'mlp_tanh', 'cnn', 'transformer', 'bert']) {
    for (const p of ['training', 'inference'] as const) {
      // BERT's training step with its 12 layers is a 1.2 MB host.cpp that takes g++ 40 s; 4 layers
      // (one per IPU) emit the same code per layer
      const args = name === 'bert' && p === 'training' ? { layers: 4, ipus: 4 } : undefined;
      cases.push({ name: `examples/${name}.tg ${p}${args ? ' --arg layers=4 ipus=4' : ''}`, make: () => step(example(name, args), p) });
    }
  }
  // 3-D and 1-D convolution and pooling (N-D ConvParams, N-D pool vertices and their gradients)
  for (const p of ['training', 'inference'] as const) cases.push({ name: `examples/volume.tg ${p}`, make: () => step(example('volume'), p) });
  // a user's codelet pasted into codelets.cpp (the custom op and its gradient op)
  cases.push({
    name: 'examples/custom-op/leaky.tg training',
    make: () => {
      registerLeakyRelu();
      return step(loadModelFile(path.join(CUSTOM_EXAMPLE, 'leaky.tg')), 'training');
    },
  });
  for (const name of ['mlp', 'cnn', 'transformer']) {
    cases.push({ name: `examples/${name}.tg training, replicationFactor(2)`, make: () => step(example(name), 'training', new Options().replicationFactor(2), 'Adam') });
  }
  cases.push({ name: 'examples/mlp.tg inference, replicationFactor(2)', make: () => step(example('mlp'), 'inference', new Options().replicationFactor(2)) });
  for (const p of ['training', 'inference'] as const) {
    cases.push({ name: `examples/transformer.tg ${p}, ShardedExecution`, make: () => step(example('transformer'), p, withStrategy(new ShardedExecution())) });
  }
  cases.push({
    name: 'examples/transformer.tg --arg layers=4 training, transformer_pipelined.opts',
    make: () => step(example('transformer', { layers: 4 }), 'training', new Options().loadFromFile(path.join(EXAMPLES, 'transformer_pipelined.opts'))),
  });
  // stages drawing dropout masks for their micro-batch: the random counter shifted around them
  cases.push({
    name: 'transformer with dropout, PipelinedExecution Interleaved',
    make: () => step(compileModelSource(TRANSFORMER_DROPOUT, 'transformer_dropout.tg'), 'training', withStrategy(new PipelinedExecution().setPipelineSchedule(PipelineSchedule.Interleaved), 4)),
  });
  const phases = () => [new Phase('A'), new Phase('B'), new Phase('C')];
  const phased = () => compileModelSource(PHASED_MODEL, 'phased.tg');
  cases.push({ name: 'phased training, SerialPhasedExecution OffChipAfterEachPhase', make: () => step(phased(), 'training', withStrategy(new SerialPhasedExecution(phases()).setTensorsLiveness(Liveness.OffChipAfterEachPhase), 2), 'Adam') });
  cases.push({ name: 'phased training, ParallelPhasedExecution', make: () => step(phased(), 'training', withStrategy(new ParallelPhasedExecution(phases()).sendTensorsOffChipAfterFwd(), 2)) });
  cases.push({ name: 'phased inference, SerialPhasedExecution', make: () => step(phased(), 'inference', withStrategy(new SerialPhasedExecution(phases()))) });
  // an embedding lookup planned with set_available_memory (its update too), and a stepped dynamic_slice
  cases.push({
    name: 'lookup with set_available_memory and dynamic_slice with a step, training',
    make: () => {
      const m = new ModelBuilder('lookup');
      const ids = m.input('ids', 'int32', [4]);
      const start = m.input('start', 'int32', []);
      const rows = m.setAvailableMemory(m.gather(m.parameter('embedding.weight', 'float32', [6, 3]), ids), 0.2);
      m.loss(m.identityLoss(m.dynamicSlice(rows, start, 0, 3, 2)));
      return step(m.graph, 'training');
    },
  });
  // IO tiles: an overlapped input and output, the Adam state's remote transfers staged through them
  cases.push({
    name: 'IO tiles, training: numIOTiles(32), overlapped input and output, Adam state off chip through IO tiles',
    make: () => {
      const m = new ModelBuilder('io');
      const x = m.setOverlapForInput(m.input('x', 'float32', [4, 8]), 'overlap_device_iteration_loop');
      const y = m.setOverlapForOutput(m.relu(m.matmul(x, m.parameter('w', 'float32', [8, 4], { kind: 'init', fn: 'xavier_uniform', args: { seed: 1 } }))), 'overlap_accumulation_loop');
      m.output('y', y);
      m.loss(m.identityLoss(m.mul(y, y)));
      const o = new Options().deviceIterations(2);
      o.Training.gradientAccumulation(2);
      o.TensorLocations.numIOTiles(32).setOptimizerLocation(new TensorLocationSettings().useOnChipStorage(false).useIOTilesToLoad(true).useIOTilesToStore(true));
      return step(m.graph, 'training', o, 'Adam');
    },
  });
  cases.push(...randomGraphCases(2025, randomCount - Math.floor(randomCount / 4), false));
  // some with empty dimensions (empty reductions, slices, matmuls)
  cases.push(...randomGraphCases(2026, Math.floor(randomCount / 4), true));
  return cases;
}

export interface CheckRun {
  /** Findings per case that failed (check.sh's lines about its files). */
  readonly failures: { readonly name: string; readonly lines: readonly string[] }[];
  /** Files given to check.sh (after removing duplicates) and the time the check took. */
  readonly files: number;
  readonly seconds: number;
}

/** Runs check.sh on the files in parallel batches; resolves to each file's verdict and its lines. */
async function checkFiles(files: readonly string[], workers: number): Promise<Map<string, { pass: boolean; lines: string[] }>> {
  // largest first, each to the least loaded batch
  const sized = files.map((f) => ({ f, size: fs.statSync(f).size * (f.endsWith('host.cpp') ? 4 : 1) })).sort((a, b) => b.size - a.size);
  const batches = Array.from({ length: Math.max(1, Math.min(workers, files.length)) }, () => ({ files: [] as string[], load: 0 }));
  for (const s of sized) {
    const b = batches.reduce((x, y) => (y.load < x.load ? y : x));
    b.files.push(s.f);
    b.load += s.size;
  }
  const outputs = await Promise.all(
    batches.map(
      (b) =>
        new Promise<string>((resolve, reject) => {
          const child = spawn('bash', [path.join(KIT, 'check.sh'), ...b.files], { stdio: ['ignore', 'pipe', 'pipe'] });
          let text = '';
          child.stdout.on('data', (d: Buffer) => (text += d.toString()));
          child.stderr.on('data', (d: Buffer) => (text += d.toString()));
          child.on('error', reject);
          child.on('close', () => resolve(text));
        }),
    ),
  );
  const verdicts = new Map<string, { pass: boolean; lines: string[] }>();
  for (const text of outputs) {
    let current: string | undefined;
    for (const line of text.split('\n')) {
      const head = /^== (?:host|codelet) file: (.*)$/.exec(line);
      if (head) {
        current = head[1]!;
        verdicts.set(current, { pass: false, lines: [] });
        continue;
      }
      if (line === '== summary') current = undefined;
      const verdict = /^(PASS|FAIL) (\S+?)(?::|$)/.exec(line);
      if (verdict && current === verdict[2]) verdicts.get(current)!.pass = verdict[1] === 'PASS';
      else if (current && (line.includes(': error') || line.includes('[') || line.startsWith('FAIL') || line.includes('will not link'))) verdicts.get(current)!.lines.push(line);
    }
  }
  return verdicts;
}

/**
 * Generates every case into `dir` and checks the files. A case whose module cannot be built or
 * generated fails with that error. `controls` (files the check must reject) are checked in the
 * same run; `controlPassed` says which of them passed.
 */
export async function runApiCheck(cases: readonly CppCase[], dir: string, controls: readonly string[] = [], workers = Math.min(4, os.availableParallelism())): Promise<CheckRun & { controlPassed: Map<string, boolean> }> {
  const failures: { name: string; lines: string[] }[] = [];
  const byHash = new Map<string, string>();
  const owners = new Map<string, string[]>();
  cases.forEach((c, i) => {
    let files: Record<string, string>;
    try {
      const { module, opts } = c.make();
      files = generatePoplar(module, opts ?? {}).files;
    } catch (e) {
      failures.push({ name: c.name, lines: [`generation failed: ${(e as Error).message}`] });
      return;
    }
    const caseDir = path.join(dir, String(i).padStart(3, '0'));
    fs.mkdirSync(caseDir, { recursive: true });
    // the host support library (the same for every case) is checked like a host program
    for (const file of [...hostUnits(files), 'codelets.cpp', 'tilegraph_host.cpp']) {
      const text = files[file]!;
      const hash = createHash('sha256').update(text).digest('hex');
      let p = byHash.get(hash);
      if (!p) {
        p = path.join(caseDir, file);
        fs.writeFileSync(p, text);
        byHash.set(hash, p);
      }
      // host.cpp and tilegraph_host.cpp include the library's header from their own folder
      if (file !== 'codelets.cpp') fs.writeFileSync(path.join(path.dirname(p), 'tilegraph_host.hpp'), files['tilegraph_host.hpp']!);
      owners.set(p, [...(owners.get(p) ?? []), c.name]);
    }
  });
  const t0 = performance.now();
  const files = [...owners.keys()];
  const verdicts = await checkFiles([...files, ...controls], workers);
  const seconds = (performance.now() - t0) / 1000;
  const controlPassed = new Map(controls.map((f) => [f, verdicts.get(f)?.pass ?? false]));
  const perCase = new Map<string, string[]>();
  for (const f of files) {
    const v = verdicts.get(f);
    if (v?.pass) continue;
    for (const name of owners.get(f)!) perCase.set(name, [...(perCase.get(name) ?? []), ...(v ? v.lines : [`${f}: check.sh gave no verdict`])]);
  }
  for (const [name, lines] of perCase) failures.push({ name, lines });
  return { failures, files: files.length, seconds, controlPassed };
}
