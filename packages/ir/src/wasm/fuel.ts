/**
 * Step budget for untrusted WebAssembly: a small binary rewrite that adds a mutable i32 global
 * holding the remaining fuel and, at every function entry and every loop header, code that
 * charges the instructions of the code it enters (see regionSizes) and traps, setting the fuel to
 * FUEL_SPENT, when too little is left. A run then executes at most `budget` of the module's own
 * instructions. The fuel global is exported under FUEL_EXPORT so that the runner can tell an
 * exhausted budget from the module's own traps.
 *
 * The input must already have passed WebAssembly validation (the decoder trusts its structure)
 * and import no globals (so the new global's index is the count of the module's own globals).
 */

export const FUEL_EXPORT = '__tilegraph_fuel';

/** Thrown for valid modules the rewrite does not handle (SIMD, exceptions, tail calls, ...). */
export class FuelError extends Error {}

class Reader {
  constructor(
    readonly b: Uint8Array,
    public p = 0,
  ) {}
  byte(): number {
    if (this.p >= this.b.length) throw new FuelError('unexpected end of the module');
    return this.b[this.p++]!;
  }
  u32(): number {
    let result = 0;
    let shift = 0;
    for (;;) {
      const x = this.byte();
      result += (x & 0x7f) * 2 ** shift;
      if ((x & 0x80) === 0) return result;
      shift += 7;
      if (shift > 35) throw new FuelError('malformed LEB128 integer');
    }
  }
  /** Skips a signed or unsigned LEB128 of at most `maxBytes` bytes. */
  skipLeb(maxBytes = 10): void {
    for (let i = 0; i < maxBytes; i++) if ((this.byte() & 0x80) === 0) return;
    throw new FuelError('malformed LEB128 integer');
  }
}

function leb(n: number): number[] {
  const out: number[] = [];
  do {
    let x = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) x |= 0x80;
    out.push(x);
  } while (n > 0);
  return out;
}

/** Signed LEB128 of a non-negative integer below 2^31. */
function sleb(n: number): number[] {
  const out: number[] = [];
  for (;;) {
    const x = n & 0x7f;
    n >>= 7;
    if (n === 0 && (x & 0x40) === 0) return [...out, x];
    out.push(x | 0x80);
  }
}

/** The fuel global's value after a check found too little fuel (never a count: fuel stays in [0, 2^31)). */
export const FUEL_SPENT = -1;

/** `if (fuel <u cost) { fuel = -1; unreachable } fuel -= cost` */
function fuelCheck(g: number, cost: number): number[] {
  const get = [0x23, ...leb(g)];
  const set = [0x24, ...leb(g)];
  const c = [0x41, ...sleb(cost)];
  return [...get, ...c, 0x49, 0x04, 0x40, 0x41, 0x7f, ...set, 0x00, 0x0b, ...get, ...c, 0x6b, ...set];
}

function skipBlockType(r: Reader): void {
  const t = r.b[r.p];
  if (t === 0x40 || t === 0x7f || t === 0x7e || t === 0x7d || t === 0x7c || t === 0x7b || t === 0x70 || t === 0x6f) r.p++;
  else r.skipLeb(5); // a type index (s33)
}

/** Skips the immediates of instruction `op` (already read); refuses instructions it does not know. */
function skipImmediates(r: Reader, op: number): void {
  if (op === 0x02 || op === 0x03 || op === 0x04) skipBlockType(r);
  else if (op === 0x0c || op === 0x0d || (op >= 0x20 && op <= 0x26) || op === 0x10 || op === 0xd2 || op === 0x3f || op === 0x40) r.u32();
  else if (op === 0x0e) {
    const n = r.u32();
    for (let i = 0; i <= n; i++) r.u32();
  } else if (op === 0x11) {
    r.u32();
    r.u32();
  } else if (op === 0x1c) {
    const n = r.u32();
    for (let i = 0; i < n; i++) r.byte();
  } else if (op >= 0x28 && op <= 0x3e) {
    const align = r.u32();
    if (align & 0x40) r.u32(); // multi-memory: a memory index follows
    r.u32();
  } else if (op === 0x41) r.skipLeb(5);
  else if (op === 0x42) r.skipLeb(10);
  else if (op === 0x43) r.p += 4;
  else if (op === 0x44) r.p += 8;
  else if (op === 0xd0) r.byte();
  else if (op === 0xfc) {
    const sub = r.u32();
    if (sub <= 7) {
      // saturating truncations: no immediates
    } else if (sub === 8 || sub === 10 || sub === 12 || sub === 14) {
      r.u32();
      r.u32();
    } else if (sub === 9 || sub === 11 || sub === 13 || (sub >= 15 && sub <= 17)) r.u32();
    else throw new FuelError(`uses the instruction 0xfc ${sub}, which the step counter does not support`);
  } else if (!(op <= 0x01 || op === 0x05 || op === 0x0b || op === 0x0f || op === 0x1a || op === 0x1b || (op >= 0x45 && op <= 0xc4) || op === 0xd1)) {
    throw new FuelError(`uses the instruction 0x${op.toString(16)} (SIMD, exceptions, tail calls and other extensions are not supported)`);
  }
}

/**
 * Instructions per region: region 0 is the function body outside its loops, region k the body of
 * its k-th loop outside the loops nested in it. Between two checks (a function entry or a loop
 * header) execution only moves forward through one region, so charging a region's size at its
 * check bounds the instructions a run executes by its budget.
 */
function regionSizes(body: Uint8Array, start: number): number[] {
  const r = new Reader(body, start);
  const sizes = [0];
  const frames: number[] = [];
  while (r.p < body.length) {
    const op = r.byte();
    sizes[frames.length ? frames[frames.length - 1]! : 0]! += 1;
    skipImmediates(r, op);
    if (op === 0x03) {
      frames.push(sizes.length);
      sizes.push(0);
    } else if (op === 0x02 || op === 0x04) frames.push(frames.length ? frames[frames.length - 1]! : 0);
    else if (op === 0x0b) frames.pop();
  }
  return sizes;
}

/** Rewrites one function body (locals + expression), inserting a fuel check at entry and after each loop header. */
function rewriteBody(body: Uint8Array, fuelGlobal: number): number[] {
  const r = new Reader(body);
  const groups = r.u32();
  for (let i = 0; i < groups; i++) {
    r.u32();
    r.byte();
  }
  const sizes = regionSizes(body, r.p);
  const out: number[] = [];
  append(out, body.subarray(0, r.p));
  append(out, fuelCheck(fuelGlobal, Math.max(1, sizes[0]!)));
  let loops = 0;
  let from = r.p;
  while (r.p < body.length) {
    const op = r.byte();
    skipImmediates(r, op);
    if (op === 0x03) {
      append(out, body.subarray(from, r.p));
      from = r.p;
      append(out, fuelCheck(fuelGlobal, Math.max(1, sizes[++loops]!)));
    }
  }
  append(out, body.subarray(from));
  return out;
}

interface Section {
  id: number;
  bytes: Uint8Array;
}

/** Position of a section kind in the binary's required order: 12 (data count) comes before 10 (code). */
function rank(id: number): number {
  return id === 12 ? 9.5 : id;
}

/** Appends without spreading (a large array would overflow the argument list). */
function append(out: number[], items: ArrayLike<number>): void {
  for (let i = 0; i < items.length; i++) out.push(items[i]!);
}

function vecSection(id: number, count: number, items: ArrayLike<number>): Section {
  const out = leb(count);
  append(out, items);
  return { id, bytes: new Uint8Array(out) };
}

/** Adds one entry to a vector section, or creates the section in its place. */
function appendEntry(sections: Section[], id: number, entry: readonly number[]): void {
  const i = sections.findIndex((s) => s.id === id);
  if (i >= 0) {
    const r = new Reader(sections[i]!.bytes);
    const n = r.u32();
    const items: number[] = [];
    append(items, sections[i]!.bytes.subarray(r.p));
    append(items, entry);
    sections[i] = vecSection(id, n + 1, items);
    return;
  }
  const at = sections.findIndex((s) => s.id !== 0 && rank(s.id) > rank(id));
  sections.splice(at < 0 ? sections.length : at, 0, vecSection(id, 1, entry));
}

/** The module with a step budget of `budget` instructions (see the file comment). */
export function addFuel(module: Uint8Array, budget: number): Uint8Array {
  if (!Number.isInteger(budget) || budget < 1 || budget >= 2 ** 31) throw new FuelError(`step budget must be an integer from 1 to 2^31-1, got ${budget}`);
  const r = new Reader(module, 8);
  const sections: Section[] = [];
  while (r.p < module.length) {
    const id = r.byte();
    const size = r.u32();
    if (r.p + size > module.length) throw new FuelError('a section runs past the end of the module');
    if (id === 13) throw new FuelError('uses exception handling (a tag section), which is not supported');
    sections.push({ id, bytes: module.subarray(r.p, r.p + size) });
    r.p += size;
  }
  const globals = sections.find((s) => s.id === 6);
  const fuelIndex = globals ? new Reader(globals.bytes).u32() : 0;
  // (global (mut i32) (i32.const budget)) and (export FUEL_EXPORT (global fuelIndex))
  appendEntry(sections, 6, [0x7f, 0x01, 0x41, ...sleb(budget), 0x0b]);
  const name = [...new TextEncoder().encode(FUEL_EXPORT)];
  appendEntry(sections, 7, [...leb(name.length), ...name, 0x03, ...leb(fuelIndex)]);
  const ci = sections.findIndex((s) => s.id === 10);
  if (ci >= 0) {
    const cr = new Reader(sections[ci]!.bytes);
    const n = cr.u32();
    const bodies: number[] = [];
    for (let i = 0; i < n; i++) {
      const size = cr.u32();
      const body = rewriteBody(sections[ci]!.bytes.subarray(cr.p, cr.p + size), fuelIndex);
      cr.p += size;
      append(bodies, leb(body.length));
      append(bodies, body);
    }
    sections[ci] = vecSection(10, n, bodies);
  }
  const out: number[] = [];
  append(out, module.subarray(0, 8));
  for (const s of sections) {
    out.push(s.id);
    append(out, leb(s.bytes.length));
    append(out, s.bytes);
  }
  return new Uint8Array(out);
}
