import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { importOnnxFile } from '@tilegraph/frontend';
import { BERT_BASE, writeTransformerOnnx } from './make-transformer.js';
import { BenchContext, BenchOutput, measuredRow, onnxruntimeVersion } from './results.js';

/**
 * Import benchmark: a 12-layer, 768-wide transformer encoder (random weights, ~340 MB) is written
 * to a temporary folder, then imported by tilegraph (importOnnxFile) and loaded by onnxruntime
 * (InferenceSession.create), each in a fresh child process so that its time and peak memory are
 * its own; the two take turns, `repeat` imports each, and the figures are their medians.
 */

interface Measurement {
  ms: number;
  /** Peak resident set of the child process (bytes). */
  peakRss: number;
  /** Resident set before the import started (bytes): node itself and loaded modules. */
  baseRss: number;
  heapUsedDelta: number;
  ops?: number;
}

const SELF = fileURLToPath(import.meta.url);

/** Runs in the child: one import, then a JSON line with the numbers. */
async function child(which: string, file: string): Promise<void> {
  let ort: typeof import('onnxruntime-node') | undefined;
  if (which === 'ort') ort = await import('onnxruntime-node');
  global.gc?.();
  const baseRss = process.memoryUsage().rss;
  const heap0 = process.memoryUsage().heapUsed;
  const t0 = process.hrtime.bigint();
  let ops: number | undefined;
  if (which === 'tilegraph') {
    const { graph } = importOnnxFile(file, { batchSize: 1 });
    ops = graph.numOps;
  } else {
    const session = await ort!.InferenceSession.create(file);
    await session.release();
  }
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const heapUsedDelta = process.memoryUsage().heapUsed - heap0;
  const peakRss = process.resourceUsage().maxRSS * 1024;
  const m: Measurement = { ms, peakRss, baseRss, heapUsedDelta, ...(ops !== undefined ? { ops } : {}) };
  process.stdout.write(JSON.stringify(m) + '\n');
}

/** One import (tilegraph) or session create (onnxruntime) of `file` in a fresh child process. */
export function measureImport(which: 'tilegraph' | 'ort', file: string): Measurement {
  const r = spawnSync(process.execPath, ['--expose-gc', SELF, '--child', which, file], { encoding: 'utf8', maxBuffer: 1 << 20 });
  if (r.status !== 0) throw new Error(`${which} import failed (exit ${r.status}): ${r.stderr.trim().split('\n').slice(-5).join('\n')}`);
  const line = r.stdout.trim().split('\n').pop()!;
  return JSON.parse(line) as Measurement;
}

const mb = (b: number) => `${(b / 2 ** 20).toFixed(0)} MB`;

const TILEGRAPH = 'tilegraph importOnnxFile';
const ORT = 'onnxruntime InferenceSession.create';

export async function benchImport(ctx: BenchContext, opts: { keep?: boolean } = {}): Promise<BenchOutput> {
  // --quick: two layers instead of twelve (about 60 MB instead of 340)
  const spec = ctx.quick ? { ...BERT_BASE, layers: 2 } : BERT_BASE;
  const t0 = Date.now();
  const file = writeTransformerOnnx(spec);
  const size = fs.statSync(file).size;
  const what = `${spec.layers}-layer transformer encoder, hidden ${spec.hidden}, ${mb(size)}`;
  ctx.log(`${what} (${path.basename(file)} written in ${Date.now() - t0} ms); ${ctx.repeat} imports each`);
  try {
    const runs: Record<'tilegraph' | 'ort', Measurement[]> = { tilegraph: [], ort: [] };
    // taking turns, so that load on the machine falls on both alike
    for (let i = 0; i < ctx.repeat; i++) for (const which of i % 2 ? (['ort', 'tilegraph'] as const) : (['tilegraph', 'ort'] as const)) runs[which].push(measureImport(which, file));
    const tg = runs.tilegraph;
    const ort = runs.ort;
    const c = `${spec.layers}-layer encoder (${mb(size)})`;
    const overStart = (m: Measurement) => m.peakRss - m.baseRss;
    const rows = [
      measuredRow({ benchmark: 'import', case: c, subject: TILEGRAPH, metric: 'time', unit: 'ms', higherIsBetter: false, samples: tg.map((m) => m.ms), peers: [{ name: ORT, samples: ort.map((m) => m.ms) }] }),
      measuredRow({ benchmark: 'import', case: c, subject: TILEGRAPH, metric: 'peak RSS over start', unit: 'bytes', higherIsBetter: false, samples: tg.map(overStart), peers: [{ name: ORT, samples: ort.map(overStart) }] }),
      measuredRow({ benchmark: 'import', case: c, subject: TILEGRAPH, metric: 'peak RSS', unit: 'bytes', higherIsBetter: false, samples: tg.map((m) => m.peakRss), peers: [{ name: ORT, samples: ort.map((m) => m.peakRss) }] }),
      measuredRow({ benchmark: 'import', case: c, subject: TILEGRAPH, metric: 'JS heap growth', unit: 'bytes', higherIsBetter: false, samples: tg.map((m) => m.heapUsedDelta) }),
    ];
    return {
      title: `${what}: tilegraph importOnnxFile beside onnxruntime-node InferenceSession.create, each import in a fresh process`,
      rows,
      notes: [`tilegraph's graph has ${tg[0]!.ops ?? '?'} IR ops; peak RSS over start: the child's peak resident set less what it held before the import (node and the loaded modules)`],
      versions: { onnxruntime: onnxruntimeVersion() },
    };
  } finally {
    if (!opts.keep) fs.rmSync(path.dirname(file), { recursive: true, force: true });
  }
}

if (process.argv[1] && pathToFileURL(path.resolve(process.argv[1])).href === import.meta.url) {
  if (process.argv[2] === '--child') {
    child(process.argv[3]!, process.argv[4]!).catch((e) => {
      console.error(e instanceof Error ? e.stack : String(e));
      process.exit(1);
    });
  } else {
    console.error('run this benchmark with `npm run bench -- import`');
    process.exitCode = 2;
  }
}
