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

/** `--import-path DIR...`: folders a model file may import from (each must be a folder). */
export const IMPORT_PATH_FLAG = ['--import-path <dir...>', "folders a .tg model may import from besides its own folder and the standard library"] as const;

export function importPathsOf(o: Record<string, unknown>): { importPaths?: string[] } {
  const dirs = o['importPath'] as string[] | undefined;
  return dirs?.length ? { importPaths: dirs } : {};
}

export function positiveNumber(v: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError(`expected a positive number, got '${v}'`);
  return n;
}
