import fs from 'node:fs';
import path from 'node:path';
import { listCache } from './cache.js';

/**
 * Why a build did not find its executable in the cache, in words a user can act on: the entries
 * of the same model are compared with what this build would have been made from (each source
 * file's digest, the toolchain, the compile flags), as their manifests record it.
 */

/** What an executable entry was made from, as recorded in its manifest. */
export interface BuildInputs {
  /** sha256 of each C++ source as the compiler sees it (comments with source locations blanked). */
  readonly sources: Readonly<Record<string, string>>;
  readonly toolchainVersion: string;
  /** The compile flags, as JSON. */
  readonly flags: string;
}

const WHAT_CHANGED: Readonly<Record<string, string>> = {
  'host.cpp': 'the host program (the model, its sizes, or options such as replication, accumulation or the optimizer)',
  'codelets.cpp': 'the device code (the ops or their types)',
};

function recorded(dir: string): (Partial<BuildInputs> & { module?: string }) | undefined {
  try {
    const m = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8')) as Record<string, unknown>;
    const flags = m['flags'];
    return {
      ...(typeof m['module'] === 'string' ? { module: m['module'] } : {}),
      ...(m['sources'] && typeof m['sources'] === 'object' ? { sources: m['sources'] as Record<string, string> } : {}),
      ...(typeof m['toolchainVersion'] === 'string' ? { toolchainVersion: m['toolchainVersion'] } : {}),
      ...(flags !== undefined ? { flags: JSON.stringify(flags) } : {}),
    };
  } catch {
    return undefined;
  }
}

/**
 * Why `module`'s executable was not in `cacheDir`. `damaged` is the problem of an entry with the
 * right key that could not be used (it was rebuilt).
 */
export function explainCacheMiss(cacheDir: string, module: string, now: BuildInputs, damaged?: string): string {
  if (damaged) return `the cached build was damaged (${damaged}) and was made again`;
  const same = listCache(cacheDir, { verify: false }).filter((e) => e.kind === 'executable' && e.module === module);
  if (same.length === 0) return `no build of '${module}' is in the cache (${cacheDir}): the first build of this model there, or it was pruned`;
  // the most recently used build of the same model is the one the user most likely expected
  const prev = recorded(same[0]!.dir);
  const others = same.length === 1 ? 'the cached build' : `the last used of the ${same.length} cached builds`;
  if (!prev?.sources) return `${others} of '${module}' does not record what it was made from (made by an older version); nothing to compare`;
  if (prev.toolchainVersion !== undefined && prev.toolchainVersion !== now.toolchainVersion) return `${others} of '${module}' was made with another toolchain (${prev.toolchainVersion}; now ${now.toolchainVersion})`;
  if (prev.flags !== undefined && prev.flags !== now.flags) return `${others} of '${module}' was made with other compile flags`;
  const changed = Object.keys({ ...now.sources, ...prev.sources })
    .filter((f) => now.sources[f] !== prev.sources![f])
    .sort();
  if (changed.length === 0) return `${others} of '${module}' was made from the same sources under another key (a cache format change)`;
  return `${others} of '${module}' differs in ${changed.map((f) => `${f}, ${WHAT_CHANGED[f] ?? 'a generated file'}`).join('; and in ')}`;
}
