import { InvalidArgumentError } from 'commander';

/** Flag values checked as they are parsed: a bad one is a command-line error (exit 2) before any work. */

export function positiveInt(v: string): number {
  const n = Number(v);
  if (!/^\s*\d+\s*$/.test(v) || !Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError(`expected a positive integer, got '${v}'`);
  return n;
}

export function naturalInt(v: string): number {
  const n = Number(v);
  if (!/^\s*\d+\s*$/.test(v) || !Number.isSafeInteger(n)) throw new InvalidArgumentError(`expected a non-negative integer, got '${v}'`);
  return n;
}

export function finiteNumber(v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError(`expected a number, got '${v}'`);
  return n;
}

export function positiveNumber(v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`expected a positive number, got '${v}'`);
  return n;
}

/** `--explain-cache`: on a build that did not come from the executable cache, say why not. */
export const EXPLAIN_CACHE_FLAG = ['--explain-cache', 'when the executable is built rather than taken from the executable cache, say why it was not there'] as const;

/** ", from the executable cache" or ", built (not in the executable cache[: why])" for a compile line. */
export function cacheNote(status: { hit: boolean; reason?: string } | undefined, explain: boolean): string {
  if (!status) return '';
  if (status.hit) return ', from the executable cache';
  return `, built (not in the executable cache${explain && status.reason ? `: ${status.reason}` : ''})`;
}

/** The cache status as JSON fields: cache "hit" or "miss", and why. */
export function cacheJson(status: { hit: boolean; reason?: string } | undefined): Record<string, unknown> {
  if (!status) return {};
  return { cache: status.hit ? 'hit' : 'miss', ...(status.reason !== undefined ? { cache_reason: status.reason } : {}) };
}
