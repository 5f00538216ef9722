import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Options, importOnnxFile } from '@tilegraph/frontend';
import { Graph, GraphBuilder, Rng, Tensor } from '@tilegraph/ir';
import { makeOptimizer } from '@tilegraph/passes';
import { BackendFactory, compiledBackend, inferenceModel, referenceBackend, trainingModel } from '@tilegraph/runtime';

/**
 * Run benchmark: inference and training-step throughput of the MLP and CNN of ../shared/oracles,
 * compiled for the emulated IPU (generated Poplar C++ on poplar-host), beside the reference
 * interpreter and beside onnxruntime-node running the same ONNX file for inference, on this
 * machine in the same run. Prints samples per second and the ratios.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const ORACLES = path.resolve(here, '../../../../shared/oracles');
const BATCH = 32;
const ITERATIONS = 16; // deviceIterations per run
const SECONDS = 2; // time spent measuring each configuration

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

/** Calls `step` (which processes `samples` samples) for about SECONDS; returns samples per second. */
async function throughput(samples: number, step: () => unknown): Promise<number> {
  await step(); // warm up (and compile)
  let n = 0;
  const t0 = performance.now();
  while (performance.now() - t0 < SECONDS * 1000) {
    await step();
    n++;
  }
  return (n * samples) / ((performance.now() - t0) / 1000);
}

function withLoss(g: Graph): Graph {
  const b = new GraphBuilder(g);
  const logits = g.outputs.find((o) => o.name === 'logits')!.value;
  const y = b.input('y', 'int32', [logits.type.shape[0]!]);
  b.output('loss', b.op('identity_loss', [b.op('cross_entropy', [logits, y])]));
  return g;
}

export async function benchRun(): Promise<void> {
  if (!fs.existsSync(path.join(ORACLES, 'mlp.onnx'))) {
    console.log(`run: skipped, the oracle models are not at ${ORACLES}`);
    return;
  }
  const ort = await import('onnxruntime-node');
  const fmt = (x: number) => x.toFixed(0).padStart(10);
  console.log(`run: batch ${BATCH}, deviceIterations ${ITERATIONS}, samples/s (higher is better)`);
  console.log(`${'model'.padEnd(6)} ${'mode'.padEnd(9)} ${'emulated'.padStart(10)} ${'reference'.padStart(10)} ${'ort'.padStart(10)}  emulated/ort  emulated/reference`);
  for (const model of ['mlp', 'cnn']) {
    const file = path.join(ORACLES, `${model}.onnx`);
    const importAt = (batch: number) => importOnnxFile(file, { batchSize: batch }).graph;
    const samples = BATCH * ITERATIONS;
    const opts = () => new Options().deviceIterations(ITERATIONS);
    const infer = async (backend: BackendFactory) => {
      const m = inferenceModel(importAt(BATCH), opts(), { backend });
      const feeds = randomInputs(m.model, ITERATIONS, 1);
      return throughput(samples, () => m.run(feeds));
    };
    const train = async (backend: BackendFactory) => {
      const g = withLoss(importAt(BATCH));
      const m = trainingModel(g, opts(), makeOptimizer('SGD', { lr: 0.01 }), { backend });
      const feeds = randomInputs(g, ITERATIONS, 2);
      return throughput(samples, () => m.run(feeds));
    };
    const session = await ort.InferenceSession.create(file);
    const x = randomInputs(importAt(BATCH), 1, 3)['x']!;
    const ortFeeds = { x: new ort.Tensor('float32', x.data as Float32Array, [...x.shape]) };
    const ortRate = await throughput(BATCH, () => session.run(ortFeeds));
    await session.release();
    const ie = await infer(compiledBackend);
    const ir = await infer(referenceBackend);
    console.log(`${model.padEnd(6)} ${'inference'.padEnd(9)} ${fmt(ie)} ${fmt(ir)} ${fmt(ortRate)}  ${(ie / ortRate).toFixed(3).padStart(12)}  ${(ie / ir).toFixed(2).padStart(18)}`);
    const te = await train(compiledBackend);
    const tr = await train(referenceBackend);
    console.log(`${model.padEnd(6)} ${'training'.padEnd(9)} ${fmt(te)} ${fmt(tr)} ${'-'.padStart(10)}  ${'-'.padStart(12)}  ${(te / tr).toFixed(2).padStart(18)}`);
  }
  console.log('(emulated: compiled Poplar C++ on poplar-host, one CPU process; ort: onnxruntime-node CPU; training has no ORT peer)');
}
