import * as fs from 'node:fs';
import { cacheMaxBytes, checkCacheDir, resolveCacheDir } from '@tilegraph/runtime';
import { UsageError, isDiagnosticError } from './diagnostics.js';

/** A diagnostic of the runtime's cache checks as a command-line error (its message and notes on one line). */
function asUsage(e: unknown): never {
  if (isDiagnosticError(e)) throw new UsageError(e.diagnostics.map((d) => [d.message, ...(d.notes ?? [])].join('; ')).join('\n'));
  throw e;
}

/**
 * Checks the executable cache folder before any work: `dir` (an option or --dir), else the default.
 * One that exists must be a folder of ours that others cannot write into (the runtime's checks);
 * otherwise the named path is wrong (exit 2), said before a build that would fail on it. A missing
 * one is left alone (made when first used).
 */
export function checkCacheFolderUpFront(dir?: string): string {
  let resolved: string;
  try {
    resolved = resolveCacheDir(dir);
  } catch (e) {
    asUsage(e);
  }
  let exists = true;
  try {
    fs.lstatSync(resolved);
  } catch {
    exists = false;
  }
  if (exists) {
    try {
      checkCacheDir(resolved);
    } catch (e) {
      asUsage(e);
    }
  }
  return resolved;
}

/** A bad TILEGRAPH_CACHE_MAX_BYTES is bad usage (exit 2), said before the command runs rather than after a build. */
export function checkCacheSizeVariable(): void {
  try {
    cacheMaxBytes();
  } catch (e) {
    asUsage(e);
  }
}
