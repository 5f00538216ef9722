import path from 'node:path';
import { Module } from '@tilegraph/ir';
import { BuildPlan, GC200_COST_MODEL, estimateGraphCycles, estimateModuleCycles, executionCounts } from '@tilegraph/codegen-poplar';
import type { Options } from '@tilegraph/frontend';
import type { PassTiming } from '@tilegraph/passes';
import { COMPILE_PROFILE_FILE, COMPILE_PROFILE_FORMAT, CompileProfile, PROFILE_VERSION, writeJsonAtomic } from './format.js';

/** What the compile's profile is made from. */
export interface CompileFacts {
  readonly module: Module;
  readonly kind: 'training' | 'inference';
  readonly options: Options;
  /** The backend's kind ('compiled', 'reference', ...). */
  readonly backend: string;
  /** The compiled executable's plan (compiled backend only). */
  readonly plan?: BuildPlan;
  readonly passes: readonly PassTiming[];
  readonly seconds: { readonly passes: number; readonly start: number };
}

/** The compile's profile (compile.json): the compiler's view, beside which the report shows the measurements. */
export function compileProfile(f: CompileFacts): CompileProfile {
  const m = f.module;
  const counts = executionCounts(m.program);
  const byKind = new Map<string, { ops: number; cycles: number }>();
  const graphs = [...m.graphs].map(([name, g]) => {
    const est = estimateGraphCycles(g);
    const times = counts.get(name) ?? 0;
    for (const k of est.byKind) {
      const e = byKind.get(k.kind) ?? { ops: 0, cycles: 0 };
      byKind.set(k.kind, { ops: e.ops + k.ops * times, cycles: e.cycles + k.cycles * times });
    }
    const kinds: Record<string, number> = {};
    for (const op of g.ops) kinds[op.kind] = (kinds[op.kind] ?? 0) + 1;
    return { name, executionsPerRun: times, ops: g.ops.length, byKind: kinds, estimatedCycles: est.cycles };
  });
  const mem = f.plan?.memory;
  return {
    format: COMPILE_PROFILE_FORMAT,
    version: PROFILE_VERSION,
    model: m.name,
    modelName: f.options.modelNameFor(f.kind),
    kind: f.kind,
    createdAt: new Date().toISOString(),
    backend: f.backend,
    options: {
      deviceIterations: f.options.device_iterations,
      replicationFactor: f.options.replication_factor,
      gradientAccumulation: f.kind === 'training' ? f.options.Training.gradient_accumulation : 1,
      logCycleCount: f.options.log_cycle_count,
    },
    seconds: f.seconds,
    passes: f.passes.map((p) => ({ pass: p.pass, ms: p.ms, ...(p.ops !== undefined ? { ops: p.ops } : {}) })),
    graphs,
    estimate: {
      cyclesPerRun: estimateModuleCycles(m).cycles,
      clockHz: GC200_COST_MODEL.clockHz,
      byKind: [...byKind].map(([kind, x]) => ({ kind, ...x })).sort((a, b) => b.cycles - a.cycles),
    },
    memory: mem
      ? {
          ipus: mem.ipus,
          tilesPerIpu: mem.tilesPerIpu,
          bytesPerTile: mem.bytesPerTile,
          maxTileBytes: mem.maxTileBytes,
          maxTile: mem.maxTile,
          perIpu: mem.perIpu.map((p) => ({ ipu: p.ipu, alwaysLiveBytes: p.alwaysLiveBytes, peakLiveBytes: p.peakLiveBytes, remoteBytes: p.remoteBytes, maxTile: p.maxTile, maxTileBytes: p.maxTileBytes, peakAt: p.peakAt })),
        }
      : null,
    // the generated program names its streams in<index> and out<index> (codegen-poplar's generate.ts)
    streams: f.plan
      ? [...f.plan.inputs.map((s) => ({ handle: `in${s.index}`, name: s.name, kind: 'input' })), ...f.plan.outputs.map((o) => ({ handle: `out${o.index}`, name: o.name, kind: o.kind }))]
      : [],
  };
}

/** Writes compile.json into the model's profile folder. */
export function writeCompileProfile(dir: string, f: CompileFacts): string {
  const file = path.join(dir, COMPILE_PROFILE_FILE);
  writeJsonAtomic(file, compileProfile(f));
  return file;
}
