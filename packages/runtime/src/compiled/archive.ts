import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { DiagnosticError, Module, Tensor, error } from '@tilegraph/ir';
import type { BuildPlan } from '@tilegraph/codegen-poplar';
import { BackendFactory, BackendOptions } from '../session/backend.js';
import { CompiledBackend, CompiledBackendOptions, ExecutableImage, compileModule, initialState, tensorBytes, tensorFromBytes } from './backend.js';
import { defaultCacheDir } from './build.js';

/**
 * Exported executables (PopTorch's compileAndExport / loadExecutable): one file holding the
 * executable, its codelets (SDK builds), the build plan and the initial state, so a model runs
 * again without the model definition or a compiler.
 *
 * Layout: "TGEXE001", a little-endian uint32 header length, the JSON header, then the blobs the
 * header lists by offset and size.
 */

const MAGIC = 'TGEXE001';

interface Header {
  readonly plan: BuildPlan;
  readonly files: { readonly name: string; readonly offset: number; readonly size: number; readonly executable: boolean }[];
  readonly state: { readonly name: string; readonly offset: number; readonly size: number }[];
}

/** Compiles a module and writes it to `file` (written atomically). */
export function compileAndExport(module: Module, file: string, opts: CompiledBackendOptions = {}): void {
  const built = compileModule(module, opts);
  const blobs: Buffer[] = [];
  let offset = 0;
  const add = (b: Uint8Array): { offset: number; size: number } => {
    const r = { offset, size: b.length };
    blobs.push(Buffer.from(b));
    offset += b.length;
    return r;
  };
  const files = ['step', 'codelets.gp']
    .filter((f) => fs.existsSync(path.join(built.dir, f)))
    .map((f) => ({ name: f, executable: f === 'step', ...add(fs.readFileSync(path.join(built.dir, f))) }));
  const init = initialState(module);
  // whole tensors (sharded state is cut when loaded); transient working copies have no value to keep
  const state = built.plan.state.filter((s) => s.storage !== 'transient').map((s) => ({ name: s.name, ...add(tensorBytes(init.get(s.name)!)) }));
  const header: Header = { plan: built.plan, files, state };
  const head = Buffer.from(JSON.stringify(header), 'utf8');
  const len = Buffer.alloc(4);
  len.writeUInt32LE(head.length);
  writeFileAtomic(file, Buffer.concat([Buffer.from(MAGIC, 'ascii'), len, head, ...blobs]));
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
    if ((e as NodeJS.ErrnoException).code === undefined) throw e;
    throw new DiagnosticError(error(`cannot write ${file}: ${(e as Error).message.replace(/^[A-Z]+: /, '')}`, undefined, ['check the path, its permissions and the free space']));
  }
}

/** An exported executable, ready to run. */
export interface LoadedExecutable {
  readonly plan: BuildPlan;
  readonly image: ExecutableImage;
  /** Starts the executable. */
  backend(opts?: BackendOptions & { timeoutMs?: number }): CompiledBackend;
  /** A factory for sessions (the module argument is ignored: the executable is fixed). */
  readonly factory: BackendFactory;
}

/** Reads a file written by compileAndExport; unpacks the executable into the cache. */
export function loadExecutable(file: string, opts: { cacheDir?: string } = {}): LoadedExecutable {
  const bad = (why: string) => new DiagnosticError(error(`${file}: not a tilegraph executable (${why})`));
  let data: Buffer;
  try {
    data = fs.readFileSync(file);
  } catch (e) {
    throw new DiagnosticError(error(`cannot read ${file}: ${(e as Error).message}`));
  }
  if (data.length < 12 || data.subarray(0, 8).toString('ascii') !== MAGIC) throw bad('wrong magic');
  const headLen = data.readUInt32LE(8);
  if (12 + headLen > data.length) throw bad('truncated header');
  let header: Header;
  try {
    header = JSON.parse(data.subarray(12, 12 + headLen).toString('utf8')) as Header;
  } catch {
    throw bad('unreadable header');
  }
  const base = 12 + headLen;
  const blob = (b: { offset: number; size: number }): Buffer => {
    if (!Number.isSafeInteger(b.offset) || !Number.isSafeInteger(b.size) || b.offset < 0 || b.size < 0 || base + b.offset + b.size > data.length) throw bad('truncated data');
    return data.subarray(base + b.offset, base + b.offset + b.size);
  };
  const plan = header.plan;
  const initial = new Map<string, Tensor>();
  for (const s of header.state) {
    const info = plan.state.find((x) => x.name === s.name);
    if (!info) throw bad(`state '${s.name}' is not in the plan`);
    initial.set(s.name, tensorFromBytes(info.dtype, info.shard?.whole ?? info.shape, new Uint8Array(blob(s))));
  }
  // unpack once per distinct file content
  const key = createHash('sha256').update(data).digest('hex');
  const cacheDir = path.resolve(opts.cacheDir ?? defaultCacheDir());
  const dir = path.join(cacheDir, `loaded-${key.slice(0, 40)}`);
  if (!fs.existsSync(path.join(dir, 'complete'))) {
    fs.mkdirSync(cacheDir, { recursive: true });
    const tmp = path.join(cacheDir, `.build-loaded-${process.pid}-${randomBytes(4).toString('hex')}`);
    fs.mkdirSync(tmp);
    for (const f of header.files) {
      if (f.name !== 'step' && f.name !== 'codelets.gp') throw bad(`unexpected file '${f.name}'`);
      fs.writeFileSync(path.join(tmp, f.name), blob(f), { mode: f.executable ? 0o755 : 0o644 });
    }
    fs.writeFileSync(path.join(tmp, 'plan.json'), JSON.stringify(plan, null, 2));
    fs.writeFileSync(path.join(tmp, 'complete'), '');
    try {
      fs.renameSync(tmp, dir);
    } catch {
      fs.rmSync(tmp, { recursive: true, force: true });
      if (!fs.existsSync(path.join(dir, 'complete'))) throw bad('cannot unpack');
    }
  }
  const args = header.files.some((f) => f.name === 'codelets.gp') ? [path.join(dir, 'codelets.gp')] : [];
  const image: ExecutableImage = { dir, executable: path.join(dir, 'step'), args, plan, initial };
  return {
    plan,
    image,
    backend: (o = {}) => new CompiledBackend(image, o),
    factory: (_m, o) => new CompiledBackend(image, o),
  };
}
