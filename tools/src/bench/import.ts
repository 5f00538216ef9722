import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { importOnnxFile } from '@tilegraph/frontend';
import { BERT_BASE, writeTransformerOnnx } from './make-transformer.js';

/**
 * Import benchmark: a 12-layer, 768-wide transformer encoder (random weights, ~340 MB) is written
 * to a temporary folder, then imported by tilegraph (importOnnxFile) and loaded by onnxruntime
 * (InferenceSession.create), each in a fresh child process so that its time and peak memory are
 * its own. Prints both and their ratio.
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

function measure(which: 'tilegraph' | 'ort', file: string): Measurement {
  const r = spawnSync(process.execPath, ['--expose-gc', SELF, '--child', which, file], { encoding: 'utf8', maxBuffer: 1 << 20 });
  if (r.status !== 0) throw new Error(`${which} import failed (exit ${r.status}): ${r.stderr.trim().split('\n').slice(-5).join('\n')}`);
  const line = r.stdout.trim().split('\n').pop()!;
  return JSON.parse(line) as Measurement;
}

const mb = (b: number) => `${(b / 2 ** 20).toFixed(0)} MB`;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

export async function benchImport(opts: { runs?: number; keep?: boolean } = {}): Promise<void> {
  const runs = opts.runs ?? 3;
  const t0 = Date.now();
  const file = writeTransformerOnnx(BERT_BASE);
  const size = fs.statSync(file).size;
  console.log(`import: ${BERT_BASE.layers}-layer transformer encoder, hidden ${BERT_BASE.hidden}, ${mb(size)} (${path.basename(file)} written in ${Date.now() - t0} ms)`);
  try {
    const rows: [string, Measurement][] = [];
    for (const which of ['tilegraph', 'ort'] as const) {
      const ms: Measurement[] = [];
      for (let i = 0; i < runs; i++) ms.push(measure(which, file));
      const best = ms.reduce((a, b) => (a.ms <= b.ms ? a : b));
      rows.push([which, { ...best, ms: median(ms.map((m) => m.ms)), peakRss: median(ms.map((m) => m.peakRss)) }]);
    }
    const name = { tilegraph: 'tilegraph importOnnxFile', ort: 'onnxruntime InferenceSession.create' } as Record<string, string>;
    for (const [which, m] of rows) {
      console.log(
        `  ${name[which]!.padEnd(36)} ${m.ms.toFixed(0).padStart(6)} ms   peak RSS ${mb(m.peakRss).padStart(8)} (+${mb(m.peakRss - m.baseRss)} over start)   heap +${mb(m.heapUsedDelta)}${m.ops !== undefined ? `   ${m.ops} IR ops` : ''}`,
      );
    }
    const tg = rows[0]![1];
    const ort = rows[1]![1];
    console.log(`  ratio tilegraph / onnxruntime: time ${(tg.ms / ort.ms).toFixed(2)}x, peak memory over start ${((tg.peakRss - tg.baseRss) / (ort.peakRss - ort.baseRss)).toFixed(2)}x (median of ${runs} runs)`);
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
    benchImport().catch((e) => {
      console.error(e instanceof Error ? e.message : String(e));
      process.exit(1);
    });
  }
}
