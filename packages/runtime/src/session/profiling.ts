import fs from 'node:fs';
import path from 'node:path';
import { DiagnosticError, Diagnostic, error, warning } from '@tilegraph/ir';
import type { Options } from '@tilegraph/frontend';
import { ENGINE_PROFILE_FILE, EngineProfile, EngineRun, readEngineProfile } from '../profile/format.js';
import { CompileFacts, writeCompileProfile } from '../profile/compile.js';
import { LatencyStats, PerfCounterLists, computeLatency, hostIpuLatency, ipuHostLatency, latency, perfCounterLists } from '../profile/latency.js';
import { ProfilePlan, disposeProfilePlan, profilePlan } from '../profile/settings.js';

/**
 * A model's profiling (see profile/settings.ts): the engine options its executable gets, the
 * compile's profile it writes, and the measurements of the last run that cycleCount(),
 * getPerfCounters() and the latencies read back from the emulated engine's profile.json.
 */
export class ModelProfile {
  private constructor(
    private readonly plan: ProfilePlan | undefined,
    private readonly options: Options,
  ) {}

  /** The model's profiling as its options and POPLAR_ENGINE_OPTIONS ask (possibly none). */
  static start(options: Options, kind: 'training' | 'inference', env: NodeJS.ProcessEnv = process.env): ModelProfile {
    return new ModelProfile(profilePlan(options, kind, env), options);
  }

  /** Before a compile: the answers of a model that is not profiled (yet). */
  static unprofiled(options: Options): ModelProfile {
    return new ModelProfile(undefined, options);
  }

  /** The model's profile folder, when a profile was asked for (not the private one of logCycleCount alone). */
  get dir(): string | undefined {
    return this.plan?.requested ? this.plan.dir : undefined;
  }

  /** POPLAR_ENGINE_OPTIONS for the executable (undefined: the environment's, untouched). */
  get engineOptions(): Readonly<Record<string, string>> | undefined {
    return this.plan?.engineOptions;
  }

  /**
   * After the compile: writes compile.json into a requested folder. Returns a warning when the
   * step runs where nothing is measured (the reference interpreter).
   */
  compiled(facts: CompileFacts): Diagnostic[] {
    if (!this.plan?.requested) return [];
    writeCompileProfile(this.plan.dir, facts);
    if (facts.backend === 'reference') {
      return [warning(`profiling: the reference interpreter measures nothing: ${this.plan.dir} holds the compile's profile only`, undefined, ['profile the compiled backend (the default) for the runs'])];
    }
    return [];
  }

  /** Removes the private folder of logCycleCount alone. */
  dispose(): void {
    disposeProfilePlan(this.plan);
  }

  /** Estimated cycles of the last run (PopTorch's cycleCount, which needs logCycleCount(true)). */
  cycleCount(backend: string | undefined, runs: number): number {
    if (!this.options.log_cycle_count) {
      throw new DiagnosticError(error('cycleCount: cycle count logging is disabled', undefined, ['set Options.logCycleCount(true) before the model is compiled']));
    }
    return this.lastRun('cycleCount', backend, runs).estimatedCycles;
  }

  perfCounters(backend: string | undefined, runs: number): PerfCounterLists {
    return perfCounterLists(this.lastRun('getPerfCounters', backend, runs).perfCounters);
  }

  latency(which: 'getLatency' | 'getComputeLatency' | 'getHostIpuLatency' | 'getIpuHostLatency', backend: string | undefined, runs: number): LatencyStats {
    const p = this.perfCounters(backend, runs);
    const f = { getLatency: latency, getComputeLatency: computeLatency, getHostIpuLatency: hostIpuLatency, getIpuHostLatency: ipuHostLatency }[which];
    return f(p);
  }

  /** The emulated engine's profile after `runs` runs of this model, or a diagnostic saying why there is none. */
  engineProfile(what: string, backend: string | undefined, runs: number): EngineProfile {
    if (backend === undefined || runs === 0) throw new DiagnosticError(error(`${what}: run the model at least once first`));
    if (backend !== 'compiled') {
      throw new DiagnosticError(error(`${what} needs the compiled backend: the ${backend === 'reference' ? 'reference interpreter runs the IR on the host and' : `'${backend}' backend`} measures nothing`, undefined, ['run the model on the compiled backend (the default)']));
    }
    if (!this.plan) {
      throw new DiagnosticError(error(`${what}: the runs are measured only when the model is profiled`, undefined, ['set Options.logCycleCount(true) or Options.enableProfiling(dir) before the model is compiled']));
    }
    const file = path.join(this.plan.dir, ENGINE_PROFILE_FILE);
    if (!fs.existsSync(file)) {
      const pop = fs.existsSync(path.join(this.plan.dir, 'profile.pop'));
      throw new DiagnosticError(
        error(`${what}: the executable wrote no ${file}`, undefined, [
          pop
            ? 'the Poplar SDK wrote profile.pop there instead: open it with PopVision Graph Analyser; tilegraph reads the measurements of the emulated engine (poplar-host) only'
            : 'the measurements come from the emulated engine (poplar-host); on the Poplar SDK, Poplar writes its own profile.pop',
        ]),
      );
    }
    const profile = readEngineProfile(file);
    if (!profile.execution) {
      throw new DiagnosticError(error(`${what}: ${file} describes the graph only (autoReport.outputGraphProfile): the runs were not measured`, undefined, ['set autoReport.all or autoReport.outputExecutionProfile to "true" in POPLAR_ENGINE_OPTIONS']));
    }
    // the engine counts the runs of the model's step (program 0)
    const counted = profile.execution.programRuns[0] ?? 0;
    if (counted !== runs) {
      throw new DiagnosticError(error(`${what}: ${file} holds ${counted} runs but this model ran ${runs} times`, undefined, ['another model writes the same profile folder: give each its own Options.modelName']));
    }
    return profile;
  }

  private lastRun(what: string, backend: string | undefined, runs: number): EngineRun {
    const run = this.engineProfile(what, backend, runs).execution!.lastRun!;
    if (run.program !== 0) throw new DiagnosticError(error(`${what}: the engine's last run was of program ${run.program}, not the model's step`));
    return run;
  }
}
