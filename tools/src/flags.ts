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
