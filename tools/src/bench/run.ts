import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Options, importOnnxFile } from '@tilegraph/frontend';
import { Graph, GraphBuilder, Rng, Tensor } from '@tilegraph/ir';
import { makeOptimizer } from '@tilegraph/passes';
import { BackendFactory, PoplarExecutor, compiledBackend, inferenceModel, referenceBackend, trainingModel } from '@tilegraph/runtime';
import { BenchRow } from '../report/bench-results.js';
import { Contender, inProcess, interleavedWindows } from './measure.js';
import { BenchContext, BenchOutput, PeerInput, measuredRow, onnxruntimeVersion } from './results.js';
import { NoTorchMatch, TorchPeer, debianTorchVersion, findTorchPython, startTorchPeer, torchArchitecture } from './torch-peer.js';

/**
 * Run benchmark: inference and training-step throughput of the MLP and CNN of ../shared/oracles,
 * compiled for the emulated IPU (generated Poplar C++ on poplar-host), beside the reference
 * interpreter, onnxruntime-node running the same ONNX file (inference) and PyTorch training the
 * same layers with the same batch, loss and SGD (training). Everything runs on one CPU thread.
 * Each figure is the median of `repeat` timing windows; the contenders of a model take turns
 * window by window, so load on the machine falls on all of them alike.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const ORACLES = path.resolve(here, '../../../../shared/oracles');
const BATCH = 32;
const ITERATIONS = 16; // deviceIterations per run: a call processes BATCH × ITERATIONS samples
const LR = 0.01;
const WINDOW_SECONDS = 1;
const QUICK_WINDOW_SECONDS = 0.25;

const EMULATED = 'emulated IPU';
const REFERENCE = 'reference interpreter';
const ORT = 'onnxruntime-node';
const TORCH = 'PyTorch';

function randomInputs(g: Graph, runs: number, seed: number): Record<string, Tensor> {
  const rng = new Rng(seed);
  const out: Record<string, Tensor> = {};
  for (const op of g.inputs()) {
    const { dtype, shape } = op.result.type;
    const n = runs * shape.reduce((a, d) => a * d, 1);
    out[op.attrs['name'] as string] = Tensor.from(dtype, [runs * shape[0]!, ...shape.slice(1)], Array.from({ length: n }, () => (dtype === 'int32' ? rng.nextU32() % 10 : rng.normal())));
  }
  return out;
}

function withLoss(g: Graph): Graph {
  const b = new GraphBuilder(g);
  const logits = g.outputs.find((o) => o.name === 'logits')!.value;
  const y = b.input('y', 'int32', [logits.type.shape[0]!]);
  b.output('loss', b.op('identity_loss', [b.op('cross_entropy', [logits, y])]));
  return g;
}

/** A compiled or interpreted model as a contender, warmed up (the first run also compiles). */
function executorContender(name: string, m: PoplarExecutor, feeds: Record<string, Tensor>, opened: PoplarExecutor[]): Contender {
  opened.push(m);
  m.run(feeds);
  return inProcess(name, BATCH * ITERATIONS, () => m.run(feeds));
}

/** The PyTorch peer of a model's training, or why there is none. */
async function torchContender(file: string, python: ReturnType<typeof findTorchPython>): Promise<TorchPeer | { unavailable: string }> {
  if ('unavailable' in python) return python;
  let arch;
  try {
    arch = torchArchitecture(importOnnxFile(file, { batchSize: BATCH }).graph);
  } catch (e) {
    if (e instanceof NoTorchMatch) return { unavailable: `no exact PyTorch counterpart of ${path.basename(file)}: ${e.message}` };
    throw e;
  }
  try {
    return await startTorchPeer(TORCH, python.python, arch, { batch: BATCH, stepsPerCall: ITERATIONS, lr: LR, seed: 1 });
  } catch (e) {
    return { unavailable: e instanceof NoTorchMatch ? `the PyTorch model differs from the graph: ${e.message}` : (e as Error).message };
  }
}

export async function benchRun(ctx: BenchContext): Promise<BenchOutput> {
  const title = `MLP and CNN of ../shared/oracles, batch ${BATCH}, deviceIterations ${ITERATIONS}: samples/s of inference and of SGD training steps (lr ${LR}, mean cross-entropy)`;
  if (!fs.existsSync(path.join(ORACLES, 'mlp.onnx'))) return { title, rows: [], notes: [`skipped: the oracle models are not at ${ORACLES}`] };
  const seconds = ctx.quick ? QUICK_WINDOW_SECONDS : WINDOW_SECONDS;
  const ort = await import('onnxruntime-node');
  const python = findTorchPython();
  let torchVersion: string | undefined;
  // the emulator splits large compute sets over threads; these models are small, and every contender gets one thread
  const threadsBefore = process.env['POPLAR_HOST_THREADS'];
  process.env['POPLAR_HOST_THREADS'] = '1';
  const rows: BenchRow[] = [];
  try {
    for (const model of ['mlp', 'cnn']) {
      const file = path.join(ORACLES, `${model}.onnx`);
      const importAt = (batch: number) => importOnnxFile(file, { batchSize: batch }).graph;
      const opts = () => new Options().deviceIterations(ITERATIONS);
      const opened: PoplarExecutor[] = [];
      const infer = (backend: BackendFactory, name: string) => {
        const m = inferenceModel(importAt(BATCH), opts(), { backend });
        return executorContender(name, m, randomInputs(m.model, ITERATIONS, 1), opened);
      };
      const train = (backend: BackendFactory, name: string) => {
        const g = withLoss(importAt(BATCH));
        const m = trainingModel(g, opts(), makeOptimizer('SGD', { lr: LR }), { backend });
        return executorContender(name, m, randomInputs(g, ITERATIONS, 2), opened);
      };
      ctx.log(`${model}: compiling and warming up`);
      const session = await ort.InferenceSession.create(file, { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential' });
      const x = randomInputs(importAt(BATCH), 1, 3)['x']!;
      const ortFeeds = { x: new ort.Tensor('float32', x.data as Float32Array, [...x.shape]) };
      await session.run(ortFeeds);
      const torch = await torchContender(file, python);
      try {
        const inference = [infer(compiledBackend, `${EMULATED} inference`), infer(referenceBackend, `${REFERENCE} inference`), inProcess(`${ORT} inference`, BATCH, () => session.run(ortFeeds))];
        const training = [train(compiledBackend, `${EMULATED} training`), train(referenceBackend, `${REFERENCE} training`), ...('window' in torch ? [torch] : [])];
        if ('torchVersion' in torch) torchVersion = torch.torchVersion;
        ctx.log(`${model}: ${ctx.repeat} windows of ${seconds} s for each of ${inference.length + training.length}`);
        const rates = await interleavedWindows([...inference, ...training], ctx.repeat, seconds);
        const row = (mode: 'inference' | 'training', peers: PeerInput[]) =>
          measuredRow({ benchmark: 'run', case: `${model} ${mode}`, subject: EMULATED, metric: 'throughput', unit: 'samples/s', higherIsBetter: true, samples: rates.get(`${EMULATED} ${mode}`)!, peers });
        rows.push(row('inference', [{ name: REFERENCE, samples: rates.get(`${REFERENCE} inference`)! }, { name: ORT, samples: rates.get(`${ORT} inference`)! }]));
        const torchPeer: PeerInput = 'window' in torch ? { name: TORCH, samples: rates.get(torch.name)! } : { name: TORCH, unavailable: torch.unavailable };
        rows.push(row('training', [{ name: REFERENCE, samples: rates.get(`${REFERENCE} training`)! }, torchPeer]));
      } finally {
        if ('close' in torch) torch.close();
        for (const m of opened) m.dispose();
        await session.release();
      }
    }
  } finally {
    if (threadsBefore === undefined) delete process.env['POPLAR_HOST_THREADS'];
    else process.env['POPLAR_HOST_THREADS'] = threadsBefore;
  }
  const debian = torchVersion !== undefined && 'python' in python && python.python.startsWith('/usr/bin/') ? debianTorchVersion() : undefined;
  const torchName = torchVersion === undefined ? undefined : `${torchVersion}${debian ? ` (Debian python3-torch ${debian})` : ''}${'python' in python ? `, ${python.python}` : ''}`;
  return {
    title,
    rows,
    notes: [
      `emulated IPU: the compiled Poplar C++ on poplar-host, one process (POPLAR_HOST_THREADS=1); reference: tilegraph's interpreter; onnxruntime-node: the same ONNX file, CPU, one intra-op and one inter-op thread; PyTorch: the layers of the imported graph (checked: same parameter count and output shape), train mode, SGD, torch.set_num_threads(1)`,
      `each sample is one window of at least ${seconds} s of whole runs (${BATCH * ITERATIONS} samples a run; onnxruntime-node: ${BATCH} a run), after a warm-up run that also compiles`,
    ],
    versions: { onnxruntime: onnxruntimeVersion(), ...(torchName ? { torch: torchName } : {}) },
  };
}
