import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { generatePoplar, hostUnits } from '@tilegraph/codegen-poplar';
import { buildWritingState, compileOptionsFrom } from '@tilegraph/runtime';
import { buildStep } from '../commands/step.js';

/**
 * One compile of the compile benchmark, in a fresh process: the steps of `tilegraph compile -o`
 * (the same buildStep, generatePoplar, build through the executable cache and export), each
 * timed on its own. The parent gives the flags as the command line's parser would leave them and
 * the cache folder through XDG_CACHE_HOME, as a user's environment would.
 */

export interface CompileRequest {
  readonly file: string;
  /** The command's flags, parsed (e.g. { pipeline: 'training', optimizer: 'adam', arg: ['layers=2'] }). */
  readonly flags: Record<string, unknown>;
  /** Where the executable goes; absent: stop after the C++ generation (for host.cpp's size). */
  readonly out?: string;
}

export interface CompilePhases {
  /** Reading the model file into a graph (buildStep less its passes). */
  loadMs: number;
  passesMs: number;
  generateMs: number;
  /** The C++ build for the target, with the initial state drawn and written meanwhile (0 without `out`). */
  buildMs: number;
  /** Finishing the exported executable: the executable and header written, the file renamed into place (0 without `out`). */
  exportMs: number;
  hostCppBytes: number;
  /** Whether the executable cache held the executable (false without `out`). */
  cached: boolean;
}

const SELF = fileURLToPath(import.meta.url);

function child(req: CompileRequest): CompilePhases {
  const t0 = performance.now();
  const step = buildStep(req.file, req.flags);
  const stepMs = performance.now() - t0;
  const passesMs = step.timings.reduce((s, t) => s + t.ms, 0);
  step.options.showCompilationProgressBar(false);
  const copts = compileOptionsFrom(step.options);
  const t1 = performance.now();
  const sources = generatePoplar(step.module, copts);
  const generateMs = performance.now() - t1;
  // the host program: all its translation units
  const hostCppBytes = hostUnits(sources.files).reduce((n, f) => n + Buffer.byteLength(sources.files[f]!), 0);
  if (req.out === undefined) return { loadMs: stepMs - passesMs, passesMs, generateMs, buildMs: 0, exportMs: 0, hostCppBytes, cached: false };
  // as `tilegraph compile -o` does: the initial state is drawn and written while the C++ builds
  const t2 = performance.now();
  const { built, finish } = buildWritingState(sources, step.module, req.out, copts);
  const buildMs = performance.now() - t2;
  const t3 = performance.now();
  finish();
  const exportMs = performance.now() - t3;
  return { loadMs: stepMs - passesMs, passesMs, generateMs, buildMs, exportMs, hostCppBytes, cached: built.cached };
}

/** One compile in a fresh process with XDG_CACHE_HOME=cacheHome: its phases and the process's wall time (ms). */
export function compileInChild(req: CompileRequest, cacheHome: string): CompilePhases & { wallMs: number } {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, [SELF, '--child', JSON.stringify(req)], { encoding: 'utf8', maxBuffer: 16 << 20, env: { ...process.env, XDG_CACHE_HOME: cacheHome } });
  const wallMs = performance.now() - t0;
  if (r.status !== 0) throw new Error(`compiling ${path.basename(req.file)} failed (exit ${r.status}): ${(r.stderr || r.stdout).trim().split('\n').slice(-5).join('\n')}`);
  return { ...(JSON.parse(r.stdout.trim().split('\n').pop()!) as CompilePhases), wallMs };
}

if (process.argv[1] && pathToFileURL(path.resolve(process.argv[1])).href === import.meta.url) {
  if (process.argv[2] === '--child') {
    try {
      process.stdout.write(JSON.stringify(child(JSON.parse(process.argv[3]!) as CompileRequest)) + '\n');
    } catch (e) {
      console.error(e instanceof Error ? e.stack : String(e));
      process.exitCode = 1;
    }
  } else {
    console.error('run this benchmark with `npm run bench -- compile`');
    process.exitCode = 2;
  }
}
