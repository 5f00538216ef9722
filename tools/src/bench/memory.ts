import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatBytes, generatePoplar } from '@tilegraph/codegen-poplar';
import { Options, TensorLocationSettings, loadModelFile } from '@tilegraph/frontend';
import { buildTrainingModule, makeOptimizer } from '@tilegraph/passes';
import { compileOptionsFrom, stepSettingsFrom } from '@tilegraph/runtime';
import { BenchRow } from '../report/bench-results.js';
import { BenchContext, BenchOutput, computedRow, measuredRow } from './results.js';

/**
 * Memory benchmark: the BERT-base-shaped encoder of examples/bert.tg trained with Adam, sharded
 * over 4 IPUs — the time to build the training step (passes) and to generate its Poplar C++ with
 * the memory plan, at 3, 6 and 12 layers (compile time should grow about linearly), and the plan's
 * per-IPU figures for 12 layers; then on one IPU, as it is and with recomputation and the
 * optimizer state off chip. Compile times are medians of `repeat` builds; plan figures are computed.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
const BERT = path.resolve(here, '../../../examples/bert.tg');

interface Config {
  readonly label: string;
  readonly layers: number;
  readonly ipus: number;
  /** A recomputation checkpoint after each layer. */
  readonly checkpoints?: boolean;
  readonly options: () => Options;
}

function measure(c: Config): { passesMs: number; generateMs: number; plan: ReturnType<typeof generatePoplar>['plan']['memory']; fits: boolean } {
  const g = loadModelFile(BERT, { args: { layers: c.layers, ipus: c.ipus, checkpoints: !!c.checkpoints } });
  const options = c.options();
  const t0 = performance.now();
  const t = buildTrainingModule(g, stepSettingsFrom(options), makeOptimizer('Adam', { lr: 1e-4 }));
  const t1 = performance.now();
  const { plan, memoryProblems } = generatePoplar(t.module, { ...compileOptionsFrom(options), allowOutOfMemory: true });
  const t2 = performance.now();
  return { passesMs: t1 - t0, generateMs: t2 - t1, plan: plan.memory, fits: memoryProblems.length === 0 };
}

const BENCH = 'memory';

/** The plan of one configuration as computed rows: per IPU, always live, peak of the rest, fullest tile, remote. */
function planRows(label: string, r: ReturnType<typeof measure>): BenchRow[] {
  const row = (ipu: number, metric: string, value: number, unit = 'bytes') => computedRow({ benchmark: BENCH, case: `${label}, IPU ${ipu}`, subject: 'memory plan', metric, unit, higherIsBetter: false, value });
  return r.plan.perIpu.flatMap((m) => [
    row(m.ipu, 'always live', m.alwaysLiveBytes),
    row(m.ipu, 'peak of the rest', m.peakLiveBytes),
    row(m.ipu, 'fullest tile', m.maxTileBytes),
    ...(m.remoteBytes > 0 ? [row(m.ipu, 'remote (off chip)', m.remoteBytes)] : []),
  ]);
}

export async function benchMemory(ctx: BenchContext): Promise<BenchOutput> {
  const sharded = (layers: number): Config => ({ label: `${layers} layers, 4 IPUs`, layers, ipus: 4, options: () => new Options() });
  const layerCounts = [3, 6, 12];
  measure(sharded(3)); // warm up the JIT: the first build is slower than the rest
  const runs = new Map<number, ReturnType<typeof measure>[]>(layerCounts.map((n) => [n, []]));
  // the sizes take turns, so that load on the machine falls on all of them alike
  for (let i = 0; i < ctx.repeat; i++) for (const n of layerCounts) runs.get(n)!.push(measure(sharded(n)));
  const rows: BenchRow[] = [];
  const compileRow = (layers: number, metric: string, samples: number[]) =>
    measuredRow({ benchmark: BENCH, case: `${layers} layers, 4 IPUs`, subject: 'passes + C++ generation', metric, unit: 'ms', higherIsBetter: false, samples });
  for (const n of layerCounts) {
    const rs = runs.get(n)!;
    rows.push(compileRow(n, 'passes', rs.map((r) => r.passesMs)), compileRow(n, 'generate + plan', rs.map((r) => r.generateMs)), compileRow(n, 'per layer', rs.map((r) => (r.passesMs + r.generateMs) / n)));
  }
  const notes: string[] = [];
  const twelve = runs.get(12)![0]!;
  rows.push(...planRows('12 layers, 4 IPUs', twelve));
  notes.push(`12 layers sharded over 4 IPUs: ${twelve.fits ? 'fits' : 'does not fit'}`);
  const oneIpu: Config[] = [
    { label: '12 layers, 1 IPU', layers: 12, ipus: 1, options: () => new Options() },
    {
      label: '12 layers, 1 IPU, recompute, optimizer off chip',
      layers: 12,
      ipus: 1,
      checkpoints: true,
      options: () => {
        const o = new Options();
        o._Popart.set('autoRecomputation', 4);
        o.TensorLocations.setOptimizerLocation(new TensorLocationSettings().useOnChipStorage(false));
        return o;
      },
    },
  ];
  for (const c of oneIpu) {
    const r = measure(c);
    rows.push(...planRows(c.label, r));
    notes.push(`${c.label}: ${r.fits ? 'fits' : 'does not fit'}`);
  }
  notes.push("recompute: a checkpoint per layer with RecomputeAll; optimizer off chip: Adam's state in remote buffers");
  notes.push(`tile memory: ${twelve.plan.bytesPerTile} bytes a tile`);
  // the floor any framework keeping them on chip needs: weight, gradient accumulator and Adam's two moments, float32
  const g = loadModelFile(BERT, { args: { layers: 12, ipus: 1 } });
  const params = g.parameters().reduce((n, p) => n + p.result.type.shape.reduce((a, d) => a * d, 1), 0);
  notes.push(`training state of ${(params / 1e6).toFixed(1)} M parameters (weight, accumulator, two Adam moments in float32): ${formatBytes(16 * params)} in all, ${formatBytes(4 * params)} a piece`);
  return { title: 'BERT-base-shaped encoder (d_model 768, 12 heads, ff 3072, seq 128, batch 1), Adam: the time to compile to C++ with the memory plan, and the plan', rows, notes };
}
