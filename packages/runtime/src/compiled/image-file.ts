import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { DiagnosticError, Module, Pausable, Tensor, error, isInitSpec } from '@tilegraph/ir';
import type { BuildPlan } from '@tilegraph/codegen-poplar';
import { initialValue, tensorBytes } from './backend.js';

/**
 * The layout of an exported executable (see archive.ts) and its writing: blobs as they come, each
 * with its CRC-32, then the header, then the fixed prefix that says where the header is. A large
 * model's state can so be written while its C++ builds, tensor by tensor as it is drawn, and
 * nothing is held twice or copied into one buffer.
 *
 * Format 4: "TGEXE004", the header's CRC-32, its length (uint32s) and where it starts (uint64),
 * all little-endian; the blobs from byte DATA_START, at the offsets (from DATA_START) the header
 * lists with their sizes and CRC-32s; the JSON header last.
 */

export const FORMAT = 4;
export const MAGIC = `TGEXE${String(FORMAT).padStart(3, '0')}`;
/** Where format 4's blobs start: magic, header CRC-32, header length, header offset. */
export const DATA_START = 24;

export interface Blob {
  readonly offset: number;
  readonly size: number;
  /** Format 4: the blob's CRC-32. */
  readonly crc?: number;
}
export type FileEntry = { readonly name: string; readonly executable: boolean } & Blob;
export type StateEntry = ({ readonly name: string } & Blob) | { readonly name: string; readonly zeros: true };

export interface Header {
  readonly format: number;
  readonly plan: BuildPlan;
  readonly files: readonly FileEntry[];
  readonly state: readonly StateEntry[];
}

/** Where an exported file's pieces go: appended in order from DATA_START on, the prefix last, at the start. */
export interface ImageSink {
  append(b: Uint8Array): void;
  prefix(b: Uint8Array): void;
}

/** An exported file as pieces in memory (exportImage). */
export class MemorySink implements ImageSink {
  private readonly parts: Uint8Array[] = [new Uint8Array(DATA_START)];
  append(b: Uint8Array): void {
    this.parts.push(b);
  }
  prefix(b: Uint8Array): void {
    this.parts[0] = b;
  }
  bytes(): Buffer {
    return Buffer.concat(this.parts);
  }
}

/**
 * A file written through a temporary file beside it (created exclusively), renamed into place by
 * `commit` so readers never see half of it; `abandon` removes it. Failures (no space, no
 * permission, a read-only file system) are diagnostics naming the file.
 */
export class AtomicFile implements ImageSink {
  private readonly tmp: string;
  private fd: number | undefined;
  private at = DATA_START;

  constructor(private readonly file: string) {
    this.tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
    removeOrphans(file);
    this.fd = this.io(() => fs.openSync(this.tmp, 'wx'));
  }

  append(b: Uint8Array): void {
    this.write(b, this.at);
    this.at += b.length;
  }

  prefix(b: Uint8Array): void {
    this.write(b, 0);
  }

  commit(): void {
    this.io(() => {
      this.close();
      fs.renameSync(this.tmp, this.file);
    });
  }

  abandon(): void {
    try {
      this.close();
    } finally {
      fs.rmSync(this.tmp, { force: true });
    }
  }

  private write(b: Uint8Array, position: number): void {
    this.io(() => {
      for (let done = 0; done < b.length; ) done += fs.writeSync(this.fd!, b, done, b.length - done, position + done);
    });
  }

  private close(): void {
    if (this.fd === undefined) return;
    const fd = this.fd;
    this.fd = undefined;
    fs.closeSync(fd);
  }

  /** Runs a file operation; a failure removes the temporary file and becomes a diagnostic. */
  private io<T>(f: () => T): T {
    try {
      return f();
    } catch (e) {
      this.abandon();
      throw writeProblem(this.file, e);
    }
  }
}

/**
 * Removes the temporary files of earlier writes of `file` whose process has gone (killed while
 * its C++ built, say): their names carry the writer's process id.
 */
function removeOrphans(file: string): void {
  const prefix = `.${path.basename(file)}.`;
  let names: string[];
  try {
    names = fs.readdirSync(path.dirname(file));
  } catch {
    return; // the open that follows reports the folder's problem
  }
  for (const name of names) {
    const m = name.startsWith(prefix) ? /^(\d+)\.[0-9a-f]{8}\.tmp$/.exec(name.slice(prefix.length)) : null;
    if (!m || alive(Number(m[1]))) continue;
    try {
      fs.rmSync(path.join(path.dirname(file), name), { force: true });
    } catch {
      // another writer's to remove
    }
  }
}

/** Whether a process with this id runs (one of another user counts as running). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Why `file` could not be written, as a diagnostic (errors that are not the file system's pass through). */
export function writeProblem(file: string, e: unknown): unknown {
  if ((e as NodeJS.ErrnoException).code === undefined) return e;
  return new DiagnosticError(error(`cannot write ${file}: ${(e as Error).message.replace(/^[A-Z]+: /, '')}`, undefined, ['check the path, its permissions and the free space']));
}

/** Puts an exported file together in a sink: blobs as they come, then the header and the prefix. */
export class ImageWriter {
  private size = 0;

  constructor(private readonly sink: ImageSink) {}

  blob(b: Uint8Array): Required<Blob> {
    const r = { offset: this.size, size: b.length, crc: crc32(b) };
    this.sink.append(b);
    this.size += b.length;
    return r;
  }

  /** A state tensor's entry: a blob, or none when every byte is zero. */
  state(name: string, t: Tensor): StateEntry {
    const bytes = tensorBytes(t);
    return allZero(bytes) ? { name, zeros: true } : { name, ...this.blob(bytes) };
  }

  /** The executable and codelets in a built executable's folder. */
  files(dir: string): FileEntry[] {
    return ['step', 'codelets.gp'].filter((f) => fs.existsSync(path.join(dir, f))).map((f) => ({ name: f, executable: f === 'step', ...this.blob(fs.readFileSync(path.join(dir, f))) }));
  }

  /** The header (the state in the plan's order, transient working copies left out) and the prefix. */
  finish(plan: BuildPlan, files: readonly FileEntry[], state: ReadonlyMap<string, StateEntry>): void {
    const header: Header = { format: FORMAT, plan, files, state: plan.state.filter((s) => s.storage !== 'transient').map((s) => state.get(s.name)!) };
    const head = Buffer.from(JSON.stringify(header), 'utf8');
    const at = DATA_START + this.size;
    this.sink.append(head);
    const prefix = Buffer.alloc(DATA_START);
    prefix.write(MAGIC, 0, 'ascii');
    prefix.writeUInt32LE(crc32(head), 8);
    prefix.writeUInt32LE(head.length, 12);
    prefix.writeBigUInt64LE(BigInt(at), 16);
    this.sink.prefix(prefix);
  }
}

/**
 * Draws the module's initial state into `writer`, a variable at a time (pausing after each):
 * whole tensors (sharded state is cut when loaded); transient working copies have no value to
 * keep, and a variable initialised with zeros is recorded as such without being drawn.
 */
export function* writeInitialState(module: Module, writer: ImageWriter): Pausable<Map<string, StateEntry>> {
  const out = new Map<string, StateEntry>();
  for (const v of module.variables.values()) {
    if (v.location?.transient) continue;
    out.set(v.name, isInitSpec(v.init) && v.init.fn === 'zeros' ? { name: v.name, zeros: true } : writer.state(v.name, initialValue(v)));
    yield;
  }
  return out;
}

const ZEROS = Buffer.alloc(1 << 16);

/** Whether every byte is zero (compared a chunk at a time, at memcmp's speed). */
function allZero(b: Uint8Array): boolean {
  for (let o = 0; o < b.length; o += ZEROS.length) {
    const n = Math.min(ZEROS.length, b.length - o);
    if (Buffer.compare(b.subarray(o, o + n), ZEROS.subarray(0, n)) !== 0) return false;
  }
  return true;
}
