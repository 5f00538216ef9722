/** Errors and argument checks shared by the option classes. */

/** A bad option value: the message names the setter, what was wrong and what is accepted. */
export class OptionsError extends Error {
  /** The setter (or file position) the problem belongs to, when there is one. */
  readonly option: string | undefined;
  /** The column of an options-file line the problem is at, when it has one (reported as file:line:col). */
  col: number | undefined;
  constructor(message: string, option?: string) {
    super(option === undefined ? message : `${option}: ${message}`);
    this.name = 'OptionsError';
    this.option = option;
  }
}

export function fmt(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return String(v);
  if (typeof v === 'object') {
    if (!Array.isArray(v) && !isPlainObject(v)) return `a ${(v as object).constructor?.name ?? 'object'}`;
    try {
      return JSON.stringify(v);
    } catch {
      return String(v);
    }
  }
  return typeof v;
}

export function checkPositiveInt(option: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) {
    throw new OptionsError(`expected a positive integer, got ${fmt(v)}`, option);
  }
  return v;
}

export function checkNonNegativeInt(option: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw new OptionsError(`expected a non-negative integer, got ${fmt(v)}`, option);
  }
  return v;
}

export function checkBool(option: string, v: unknown): boolean {
  if (typeof v !== 'boolean') throw new OptionsError(`expected true or false, got ${fmt(v)}`, option);
  return v;
}

export function checkNonEmptyString(option: string, v: unknown, what = 'a non-empty string'): string {
  if (typeof v !== 'string' || v === '') throw new OptionsError(`expected ${what}, got ${fmt(v)}`, option);
  return v;
}

export function checkEnum<T extends string>(option: string, enumName: string, e: Record<string, T>, v: unknown): T {
  const values = Object.values(e) as string[];
  if (typeof v === 'string' && values.includes(v)) return v as T;
  const accepted = Object.keys(e).map((k) => `${enumName}.${k}`).join(', ');
  throw new OptionsError(`unknown ${enumName} ${fmt(v)}; expected one of ${accepted}`, option);
}

/** An object literal or parsed JSON object, from any realm (jest and vm contexts have their own Object). */
export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as object | null;
  return proto === null || Object.getPrototypeOf(proto) === null;
}

/** A deep copy of JSON-shaped data. */
export function copyJSON<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}
