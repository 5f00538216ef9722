import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DiagnosticError, error } from '@tilegraph/ir';
import type { Options } from '@tilegraph/frontend';

/**
 * Where a model's profile goes and the engine options that make the executable write it.
 *
 * Profiling is on when Options.enableProfiling(dir) is set or when POPLAR_ENGINE_OPTIONS in the
 * environment asks for a report (autoReport.all, autoReport.outputGraphProfile or
 * autoReport.outputExecutionProfile), as PopTorch documents. The model's folder is
 * `<dir>/<modelName>` (Options.modelName, default 'training' or 'inference'), dir being
 * enableProfiling's, else the environment's autoReport.directory, else the working directory.
 * The executable gets POPLAR_ENGINE_OPTIONS with the environment's options kept (Poplar applies
 * them over the program's, so they win over enableProfiling's autoReport.all) and
 * autoReport.directory set to the model's folder.
 *
 * Options.logCycleCount(true) alone measures runs into a private temporary folder, removed when
 * the model is disposed or Node exits, so that cycleCount() and the latencies have something to
 * read.
 */
export interface ProfilePlan {
  /** The model's profile folder (absolute). */
  readonly dir: string;
  /** A folder the user asked for (else a private temporary one, for logCycleCount alone). */
  readonly requested: boolean;
  /** POPLAR_ENGINE_OPTIONS for the executable. */
  readonly engineOptions: Readonly<Record<string, string>>;
}

const REPORT_KEYS = ['autoReport.all', 'autoReport.outputGraphProfile', 'autoReport.outputExecutionProfile'];

/** POPLAR_ENGINE_OPTIONS as a map of strings: a JSON object of strings, numbers or booleans. */
export function parseEngineOptions(text: string | undefined): Record<string, string> {
  if (text === undefined || text.trim() === '') return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new DiagnosticError(error(`POPLAR_ENGINE_OPTIONS is not valid JSON (${(e as Error).message})`, undefined, ['it holds a JSON object, e.g. {"autoReport.all":"true","autoReport.directory":"./report"}']));
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new DiagnosticError(error('POPLAR_ENGINE_OPTIONS must be a JSON object of option names and values'));
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(parsed)) {
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') throw new DiagnosticError(error(`POPLAR_ENGINE_OPTIONS: the value of "${k}" must be a string, number or boolean`));
    out[k] = String(v);
  }
  return out;
}

/** A model name as one folder name: path separators and other awkward characters become '_'. */
export function profileFolderName(name: string): string {
  const safe = name.replace(/[^A-Za-z0-9._-]/g, '_');
  return safe === '' || safe === '.' || safe === '..' ? '_' : safe;
}

/** The profile plan of a model, or undefined when neither profiling nor cycle counting is asked for. */
export function profilePlan(options: Options, kind: 'training' | 'inference', env: NodeJS.ProcessEnv = process.env): ProfilePlan | undefined {
  const fromEnv = parseEngineOptions(env['POPLAR_ENGINE_OPTIONS']);
  const envAsks = REPORT_KEYS.some((k) => fromEnv[k] === 'true');
  const given = options.profile_dir;
  if (given === undefined && !envAsks && !options.log_cycle_count) return undefined;
  const engineOptions: Record<string, string> = { ...(given !== undefined ? { 'autoReport.all': 'true' } : {}), ...fromEnv };
  // cycleCount() and the latencies read the measured runs
  if (options.log_cycle_count && engineOptions['autoReport.all'] !== 'true') engineOptions['autoReport.outputExecutionProfile'] = 'true';
  let dir: string;
  let requested = true;
  if (given !== undefined || envAsks) {
    dir = path.resolve(given ?? fromEnv['autoReport.directory'] ?? '.', profileFolderName(options.modelNameFor(kind)));
  } else {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tilegraph-cycles-'));
    requested = false;
    removeAtExit(dir);
  }
  engineOptions['autoReport.directory'] = dir;
  return { dir, requested, engineOptions };
}

const temporary = new Set<string>();
let exitHook = false;

function removeAtExit(dir: string): void {
  temporary.add(dir);
  if (exitHook) return;
  exitHook = true;
  process.on('exit', () => {
    for (const d of temporary) fs.rmSync(d, { recursive: true, force: true });
  });
}

/** Removes a plan's temporary folder (a requested folder is the user's and stays). */
export function disposeProfilePlan(plan: ProfilePlan | undefined): void {
  if (!plan || plan.requested) return;
  temporary.delete(plan.dir);
  fs.rmSync(plan.dir, { recursive: true, force: true });
}
