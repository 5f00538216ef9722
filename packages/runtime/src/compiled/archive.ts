import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { crc32 } from 'node:zlib';
import { DiagnosticError, Module, Tensor, error } from '@tilegraph/ir';
import type { BuildPlan, GeneratedSources } from '@tilegraph/codegen-poplar';
import { BackendCacheStatus, BackendFactory, BackendOptions } from '../session/backend.js';
import { CompiledBackend, CompiledBackendOptions, ExecutableImage, compileModuleSteps, initialStateSteps, tensorFromBytes } from './backend.js';
import { AtomicFile, Blob, DATA_START, FORMAT, Header, ImageWriter, MemorySink, writeInitialState, writeProblem } from './image-file.js';
import { BuiltExecutable, buildExecutableSteps, publish, useEntry } from './build.js';
import { EntryExpectation, autoPrune, cacheMaxBytes, checkCacheDir, entryProblem, resolveCacheDir, sealEntry, stderrWarning, touchEntry } from './cache.js';
import { Waiting, driveAsync, driveSyncWith } from './drive.js';

/**
 * Exported executables (PopTorch's compileAndExport / loadExecutable): one file holding the
 * executable, its codelets (SDK builds), the build plan and the initial state, so a model runs
 * again without the model definition or a compiler.
 *
 * Layout (format 4, see image-file.ts): the magic "TGEXE004", a prefix saying where the JSON
 * header is, the blobs it lists (each with its offset, size and CRC-32), the header last with a
 * CRC-32 of its own. A state tensor whose bytes are all zero (an optimizer's moments,
 * accumulators) is listed with `zeros: true` and no blob. A damaged file fails a checksum before
 * anything in it is used. CRC-32 catches every burst of damage up to 32 bits long and all but
 * one in 2^32 of other damage; a cryptographic digest would stop no deliberate alteration either
 * (the file carries its own checksums) and takes three times as long over hundreds of megabytes.
 * Format 3 (the header first, a sha256 of everything after the magic) and format 2 (format 3
 * without zero-filled entries) are still read.
 */

/** The oldest format this version reads (format 2 is format 3 without zero-filled entries). */
const OLDEST_FORMAT = 2;
/** Formats 2 and 3: the magic, the sha256 of everything after it, the header length; the header and blobs follow. */
const SHA_PREFIX = 40;
/** The files an exported executable may hold. */
const FILE_NAMES = new Set(['step', 'codelets.gp']);

/**
 * Compiles a module and writes it to `file` (atomically): its initial state is drawn and written
 * while the C++ builds, the executable and the header once it is built.
 */
export function compileAndExport(module: Module, file: string, opts: CompiledBackendOptions = {}): BackendCacheStatus {
  const { built, finish } = exportWhileBuilding(compileModuleSteps(module, opts), module, file);
  finish();
  return cacheStatus(built);
}

/**
 * compileAndExport of generated sources in two steps: this builds them (through the executable
 * cache) while the module's initial state is drawn and written into the file's temporary, and
 * `finish` adds the executable and the header and renames the file into place.
 */
export function buildWritingState(sources: GeneratedSources, module: Module, file: string, opts: CompiledBackendOptions = {}): { built: BuiltExecutable; finish: () => void } {
  return exportWhileBuilding(buildExecutableSteps(sources, opts), module, file);
}

function exportWhileBuilding(build: Waiting<BuiltExecutable>, module: Module, file: string): { built: BuiltExecutable; finish: () => void } {
  const out = new AtomicFile(file);
  // the temporary file goes on any failure, in the build or in finishing the file
  const orRemove = <T>(f: () => T): T => {
    try {
      return f();
    } catch (e) {
      out.abandon();
      throw e;
    }
  };
  return orRemove(() => {
    const writer = new ImageWriter(out);
    const [built, state] = driveSyncWith(build, writeInitialState(module, writer));
    const finish = () =>
      orRemove(() => {
        writer.finish(built.plan, writer.files(built.dir), state);
        out.commit();
      });
    return { built, finish };
  });
}

const cacheStatus = (built: BuiltExecutable): BackendCacheStatus => ({ hit: built.cached, ...(built.missReason !== undefined ? { reason: built.missReason } : {}) });

/**
 * The bytes of an exported executable of `module` (compiled through the executable cache).
 * `startFrom` replaces initial values by name (the whole tensors, as the module's variables hold
 * them): how a saved model's executable starts from the weights it was saved with.
 */
export function exportExecutable(module: Module, opts: CompiledBackendOptions = {}, startFrom?: ReadonlyMap<string, Tensor>): { bytes: Buffer; status: BackendCacheStatus } {
  // the initial state (random weights can take a while) is drawn while the C++ builds
  const [built, init] = driveSyncWith(compileModuleSteps(module, opts), initialStateSteps(module));
  for (const [name, t] of startFrom ?? []) if (init.has(name)) init.set(name, t);
  return { bytes: exportImage(built, init), status: cacheStatus(built) };
}

/**
 * The bytes of an exported executable of a built (or loaded) executable: its folder's files and
 * plan, with `initial` as the state it starts from (whole tensors by name).
 */
export function exportImage(built: { readonly dir: string; readonly plan: BuildPlan }, initial: ReadonlyMap<string, Tensor>): Buffer {
  const sink = new MemorySink();
  const writer = new ImageWriter(sink);
  // the state first, then the files: the order of a file written while its executable builds
  const state = new Map(built.plan.state.filter((s) => s.storage !== 'transient').map((s) => [s.name, writer.state(s.name, initial.get(s.name)!)]));
  writer.finish(built.plan, writer.files(built.dir), state);
  return sink.bytes();
}

/** Whether `data` starts as an exported executable does (of any format version). */
export function isExportedExecutable(data: Uint8Array): boolean {
  return /^TGEXE\d{3}$/.test(Buffer.from(data.subarray(0, 8)).toString('latin1'));
}

/**
 * Writes a file atomically: an exclusively created temporary file in the same folder, then a
 * rename, so readers never see half a file. The temporary file is removed when the write fails,
 * and a failure (no space, no permission, a read-only file system) is a diagnostic naming the file.
 */
export function writeFileAtomic(file: string, data: string | Uint8Array): void {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  try {
    fs.writeFileSync(tmp, data, { flag: 'wx' });
    fs.renameSync(tmp, file);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw writeProblem(file, e);
  }
}

/** An exported executable, ready to run. */
export interface LoadedExecutable {
  readonly plan: BuildPlan;
  readonly image: ExecutableImage;
  /** Starts the executable. */
  backend(opts?: BackendOptions & { stepTimeoutMs?: number }): CompiledBackend;
  /** A factory for sessions (the module argument is ignored: the executable is fixed). */
  readonly factory: BackendFactory;
}

/**
 * Reads a file written by compileAndExport; unpacks the executable into the cache (an entry per
 * distinct file, checked against the file's content before every use).
 */
export function loadExecutable(file: string, opts: { cacheDir?: string; warn?: (msg: string) => void } = {}): LoadedExecutable {
  let data: Buffer;
  try {
    data = fs.readFileSync(file);
  } catch (e) {
    throw new DiagnosticError(error(`cannot read ${file}: ${(e as Error).message}`));
  }
  return loadExecutableBytes(data, file, opts);
}

/** loadExecutable of bytes already read (`file` names them in messages: the file, or a saved model holding them). */
export function loadExecutableBytes(data: Buffer, file: string, opts: { cacheDir?: string; warn?: (msg: string) => void } = {}): LoadedExecutable {
  const bad = (why: string, hint = 're-export it with `tilegraph compile -o` or compileAndExport') =>
    new DiagnosticError(error(`${file}: not a usable tilegraph executable (${why})`, undefined, [hint]));
  const magic = data.subarray(0, 8).toString('latin1');
  const version = /^TGEXE(\d{3})$/.exec(magic);
  if (!version) throw new DiagnosticError(error(`${file}: not a tilegraph executable (wrong magic)`));
  const format = Number(version[1]);
  if (format < OLDEST_FORMAT) throw bad(`format ${format}, written by an older tilegraph without a checksum`, 're-export it with this version (`tilegraph compile -o` or compileAndExport)');
  if (format > FORMAT) throw bad(`format ${format}, written by a newer tilegraph; this one reads format ${FORMAT}`, 'load it with that version, or re-export it with this one');
  let base: number;
  let head: Buffer;
  if (format >= 4) {
    if (data.length < DATA_START) throw bad('truncated header');
    const at = Number(data.readBigUInt64LE(16));
    const length = data.readUInt32LE(12);
    if (at < DATA_START || at + length > data.length) throw bad('truncated header');
    head = data.subarray(at, at + length);
    if (crc32(head) !== data.readUInt32LE(8)) throw bad('its checksum does not match: the file is damaged or was altered');
    base = DATA_START;
  } else {
    if (data.length < SHA_PREFIX + 4) throw bad('truncated header');
    if (!createHash('sha256').update(data.subarray(SHA_PREFIX)).digest().equals(data.subarray(8, SHA_PREFIX))) throw bad('its checksum does not match: the file is damaged or was altered');
    base = SHA_PREFIX + 4 + data.readUInt32LE(SHA_PREFIX);
    if (base > data.length) throw bad('truncated header');
    head = data.subarray(SHA_PREFIX + 4, base);
  }
  let header: Header;
  try {
    header = JSON.parse(head.toString('utf8')) as Header;
  } catch {
    throw bad('unreadable header');
  }
  if (typeof header !== 'object' || header === null || header.format !== format) throw bad(`header format ${JSON.stringify((header as Header | null)?.format)}, expected ${format}`);
  if (!Array.isArray(header.files) || !Array.isArray(header.state) || typeof header.plan !== 'object' || header.plan === null || !Array.isArray(header.plan.state)) throw bad('incomplete header');
  const blob = (b: Blob): Buffer => {
    if (!Number.isSafeInteger(b.offset) || !Number.isSafeInteger(b.size) || b.offset < 0 || b.size < 0 || base + b.offset + b.size > data.length) throw bad('a blob lies outside the file');
    const bytes = data.subarray(base + b.offset, base + b.offset + b.size);
    // format 4: each blob has a checksum of its own (formats 2 and 3 checked the whole file)
    if (format >= 4 && crc32(bytes) !== b.crc) throw bad('its checksum does not match: the file is damaged or was altered');
    return bytes;
  };
  const names = new Set<string>();
  for (const f of header.files) {
    if (typeof f !== 'object' || f === null || !FILE_NAMES.has(f.name)) throw bad(`unexpected file ${JSON.stringify((f as { name?: unknown } | null)?.name)}`);
    if (names.has(f.name)) throw bad(`file '${f.name}' appears twice`);
    names.add(f.name);
  }
  if (!names.has('step')) throw bad('no executable in it');
  const plan = header.plan;
  const initial = new Map<string, Tensor>();
  for (const s of header.state) {
    const info = typeof s === 'object' && s !== null ? plan.state.find((x) => x.name === s.name) : undefined;
    if (!info) throw bad(`state ${JSON.stringify((s as { name?: unknown } | null)?.name)} is not in the plan`);
    if (initial.has(s.name)) throw bad(`state '${s.name}' appears twice`);
    const shape = info.shard?.whole ?? info.shape;
    if ('zeros' in s) {
      if (s.zeros !== true || format < 3) throw bad(`state '${s.name}' has no bytes`);
      initial.set(s.name, Tensor.zeros(info.dtype, shape));
    } else initial.set(s.name, tensorFromBytes(info.dtype, shape, new Uint8Array(blob(s))));
  }
  const blobs = new Map(header.files.map((f) => [f.name, blob(f)]));
  // unpack once per distinct executable (its plan and files, whatever the format and state); the
  // entry must hold exactly these blobs
  const identity = createHash('sha256').update(`${JSON.stringify(plan)}\0`);
  for (const [name, b] of blobs) identity.update(`${name}\0${b.length}\0`).update(b);
  const key = identity.digest('hex');
  const cacheDir = checkCacheDir(resolveCacheDir(opts.cacheDir));
  const dir = path.join(cacheDir, `loaded-${key.slice(0, 40)}`);
  const expect: EntryExpectation = {
    kind: 'loaded',
    key,
    files: Object.fromEntries([...blobs].map(([n, b]) => [n, createHash('sha256').update(b).digest('hex')])),
    present: [...blobs.keys()],
  };
  if (!useEntry(dir, expect, 'unpacked executable', opts.warn ?? stderrWarning)) {
    const maxBytes = cacheMaxBytes();
    const tmp = path.join(cacheDir, `.build-loaded-${process.pid}-${randomBytes(4).toString('hex')}`);
    fs.mkdirSync(tmp, { mode: 0o700 });
    try {
      for (const [name, b] of blobs) fs.writeFileSync(path.join(tmp, name), b, { mode: name === 'step' ? 0o755 : 0o644 });
      fs.writeFileSync(path.join(tmp, 'plan.json'), JSON.stringify(plan, null, 2));
      sealEntry(tmp, { kind: 'loaded', module: String(plan.module), key, source: path.resolve(file) });
      publish(tmp, dir, (d) => entryProblem(d, expect));
    } catch (e) {
      fs.rmSync(tmp, { recursive: true, force: true });
      if (e instanceof DiagnosticError) throw e;
      throw bad(`cannot unpack it into ${cacheDir}: ${(e as Error).message}`, 'check the cache folder and the free space');
    }
    touchEntry(dir);
    autoPrune(cacheDir, [dir], maxBytes);
  }
  const args = blobs.has('codelets.gp') ? [path.join(dir, 'codelets.gp')] : [];
  const image: ExecutableImage = { dir, executable: path.join(dir, 'step'), args, plan, initial };
  return {
    plan,
    image,
    backend: (o = {}) => new CompiledBackend(image, o),
    factory: Object.assign((_m: Module, o: BackendOptions) => new CompiledBackend(image, o), {
      startAsync: (_m: Module, o: BackendOptions, signal?: AbortSignal) => driveAsync(CompiledBackend.startSteps(image, o), signal),
    }),
  };
}
