import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Diagnostic, Graph, SourceLookup, error, noteOpenedSource } from '@tilegraph/ir';
import type { ModelFile } from './ast.js';
import { DslError } from './errors.js';
import { ElaborateOptions, Elaborator } from './elaborate.js';
import { parseFile } from './parser.js';
import type { SourceModule } from './values.js';

/** Where `import "std/..."` files live: packages/frontend/stdlib (beside src/ and dist/). */
export const STDLIB_DIR: string = fileURLToPath(new URL('../../stdlib/', import.meta.url));
/** Import paths starting with this prefix name standard-library files. */
export const STDLIB_PREFIX = 'std/';
/** Location excludes that skip the standard library, so diagnostics point at the user's call. */
export const DEFAULT_DSL_EXCLUDES: readonly string[] = [STDLIB_PREFIX];

export interface LoadOptions extends ElaborateOptions {
  /**
   * Frames whose file contains one of these are skipped when a diagnostic is rendered (PopTorch's
   * sourceLocationExcludes). Default: the standard library.
   */
  excludes?: readonly string[];
  /** Reads a file; the default reads the file system. Returns undefined when there is no such file. */
  readFile?: (realPath: string) => string | undefined;
  /** Directory of the standard library (default STDLIB_DIR). */
  stdlibDir?: string;
  /**
   * Folders imports may read besides the root model file's folder tree and the standard library
   * (`--import-path DIR`). An import elsewhere is refused without reading it.
   */
  importPaths?: readonly string[];
}

/** The real path of `p` when it exists (links followed), else `p` resolved. */
export function realOrResolved(p: string): string {
  try {
    return fs.realpathSync.native(p);
  } catch {
    return path.resolve(p);
  }
}

/** Whether `file` is `dir` or lies inside it (paths already resolved). */
export function isInside(file: string, dir: string): boolean {
  const rel = path.relative(dir, file);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/** Trees of the file system whose files are the kernel's, not the user's: never read as inputs. */
export const SPECIAL_TREES: readonly string[] = ['/proc', '/sys', '/dev'];

/**
 * The special tree (/proc, /sys, /dev) that `p`'s real path (links followed) lies in, if any: their
 * "regular" files (/proc/self/environ, ...) are the process's state, not input a user wrote.
 */
export function specialTreeOf(p: string): string | undefined {
  if (process.platform === 'win32') return undefined;
  const real = realOrResolved(path.resolve(p));
  return SPECIAL_TREES.find((t) => isInside(real, t));
}

/** What kind of non-regular file `st` is, for messages. */
export function fileKind(st: fs.Stats): string {
  return st.isDirectory() ? 'a folder' : st.isFIFO() ? 'a FIFO' : st.isSocket() ? 'a socket' : 'a device';
}

/** A compiled model: its graph and the source texts its locations refer to. */
export interface ModelCompilation {
  readonly graph: Graph;
  /** Source text of every file read, by the name locations use. */
  readonly sources: SourceLookup;
}

/** The largest model file read (a model's source is kilobytes; this stops a runaway read). */
export const MAX_MODEL_FILE_BYTES = 64 * 1024 * 1024;
/** Imports nested inside one another at most this deep (loading recurses once per level). */
export const MAX_IMPORT_DEPTH = 64;

/** A file's text, or why it was not read. */
type ReadResult = { readonly text: string } | { readonly problem: string; readonly missing?: boolean };

/**
 * Reads a model file: only a regular file of at most MAX_MODEL_FILE_BYTES. It is opened without
 * blocking and checked through its descriptor, so a FIFO or a device never stalls or floods the read.
 */
export function readModelText(p: string): ReadResult {
  // a file under /proc, /sys or /dev is not opened at all (opening a device can act on it)
  const special = specialTreeOf(p);
  if (special !== undefined) {
    let st: fs.Stats | undefined;
    try {
      st = fs.statSync(p);
    } catch {
      st = undefined;
    }
    if (st && !st.isFile()) return { problem: `it is not a regular file (${fileKind(st)}); only regular files are read` };
    return { problem: `its real path ${realOrResolved(path.resolve(p))} is under ${special}, the system's state rather than a file; only files the user wrote are read` };
  }
  let fd: number;
  try {
    fd = fs.openSync(p, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return { problem: code === 'ENOENT' || code === 'ENOTDIR' ? 'there is no such file' : `it cannot be read (${code ?? (e as Error).message})`, missing: code === 'ENOENT' || code === 'ENOTDIR' };
  }
  try {
    const st = fs.fstatSync(fd);
    if (st.isDirectory()) return { problem: 'it is a folder' };
    if (!st.isFile()) return { problem: `it is not a regular file (${st.isFIFO() ? 'a FIFO' : st.isSocket() ? 'a socket' : 'a device'}); only regular files are read` };
    if (st.size > MAX_MODEL_FILE_BYTES) return { problem: `it holds ${st.size} bytes; a model file may hold at most ${MAX_MODEL_FILE_BYTES} (64 MiB)` };
    return { text: fs.readFileSync(fd, 'utf8') };
  } catch (e) {
    return { problem: `it cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})` };
  } finally {
    fs.closeSync(fd);
  }
}

function readWith(opts: LoadOptions, p: string): ReadResult {
  if (!opts.readFile) return readModelText(p);
  const text = opts.readFile(p);
  return text === undefined ? { problem: 'it cannot be read', missing: true } : { text };
}

function syntaxDiagnostics(text: string, file: string): { ast?: ModelFile; diagnostics: Diagnostic[] } {
  const r = parseFile(text, file);
  const diagnostics = r.problems.map((p) => ({ ...error(p.message, { frames: [{ file, line: p.line, col: p.col }] }), span: p.length }));
  return r.ast ? { ast: r.ast, diagnostics } : { diagnostics };
}

/**
 * Parses one model file. Throws a DslError with every syntax error of the file.
 */
export function parseModelSource(text: string, file: string): ModelFile {
  const r = syntaxDiagnostics(text, file);
  if (!r.ast) throw new DslError(r.diagnostics, (f) => (f === file ? text : undefined));
  return r.ast;
}

/** Reads the root file and everything it imports, collecting syntax errors of all of them. */
class SourceSet {
  readonly texts = new Map<string, string>();
  readonly diagnostics: Diagnostic[] = [];
  private readonly byReal = new Map<string, SourceModule | null>();
  private readonly read: (p: string) => ReadResult;
  private readonly stdlibDir: string;

  /** Where imports may read: the root file's folder, the standard library, the user's import paths. */
  private readonly roots: string[];

  constructor(opts: LoadOptions, rootFile: string) {
    this.read = (p) => readWith(opts, p);
    this.stdlibDir = opts.stdlibDir ?? STDLIB_DIR;
    this.roots = [path.dirname(rootFile), this.stdlibDir, ...(opts.importPaths ?? [])].map((d) => realOrResolved(path.resolve(d)));
  }

  readonly lookup: SourceLookup = (f) => this.texts.get(f);

  load(text: string, display: string, real: string, stack: string[]): SourceModule | undefined {
    this.texts.set(display, text);
    // diagnostics may quote this file: the compilation opened it
    noteOpenedSource(display, text);
    const r = syntaxDiagnostics(text, display);
    this.diagnostics.push(...r.diagnostics);
    if (!r.ast) {
      this.byReal.set(real, null);
      return undefined;
    }
    const imports: { alias?: string; module: SourceModule }[] = [];
    const mod: SourceModule = { file: display, ast: r.ast, imports };
    this.byReal.set(real, mod);
    for (const item of r.ast.items) {
      if (item.kind !== 'import') continue;
      const at = { frames: [{ file: display, line: item.pos.line, col: item.pos.col }] };
      const std = item.path.startsWith(STDLIB_PREFIX);
      const childReal = std ? path.join(this.stdlibDir, item.path.slice(STDLIB_PREFIX.length)) : path.resolve(path.dirname(real), item.path);
      // an absolute import is shown as itself, not glued onto the importing file's folder
      const childDisplay = std ? item.path : path.isAbsolute(item.path) ? childReal : path.posix.normalize(path.posix.join(path.posix.dirname(display), item.path));
      if (stack.length >= MAX_IMPORT_DEPTH) {
        this.diagnostics.push({ ...error(`imports are nested more than ${MAX_IMPORT_DEPTH} deep here`, at, [`import chain: ${importChain([...stack, real])}`]), span: item.pos.length });
        continue;
      }
      if (stack.includes(childReal) || childReal === real) {
        this.diagnostics.push({ ...error(`import cycle: ${item.path} imports (directly or not) ${display}`, at), span: item.pos.length });
        continue;
      }
      if (!this.roots.some((r) => isInside(realOrResolved(childReal), r))) {
        // never read (nor echo) a file outside the model's folders
        this.diagnostics.push({
          ...error(`import '${item.path}' is outside the model's folder and the standard library; it is not read`, at, [`to allow it, add its folder with --import-path (importPaths in the API); allowed now: ${this.roots.join(', ')}`]),
          span: item.pos.length,
        });
        this.byReal.set(childReal, null);
        continue;
      }
      let child = this.byReal.get(childReal);
      if (child === undefined) {
        const read = this.read(childReal);
        if (!('text' in read)) {
          const what =
            std && read.missing
              ? `there is no standard library file '${item.path}' (in ${this.stdlibDir.replace(/[\\/]$/, '')})`
              : read.missing
                ? `cannot read '${item.path}' (looked for ${childReal})`
                : `cannot import '${item.path}': ${read.problem}`;
          this.diagnostics.push({ ...error(what, at), span: item.pos.length });
          this.byReal.set(childReal, null);
          continue;
        }
        child = this.load(read.text, childDisplay, childReal, [...stack, real]) ?? null;
      }
      if (child) imports.push(item.alias !== undefined ? { alias: item.alias, module: child } : { module: child });
    }
    return mod;
  }
}

/**
 * Compiles model source text into a Graph, with the source texts for diagnostics. Imports are
 * resolved relative to `file` (and `std/...` in the standard library). Throws a DslError carrying
 * every diagnostic and the source texts.
 */
export function compileModelSourceFull(text: string, file: string, opts: LoadOptions = {}): ModelCompilation {
  const sources = new SourceSet(opts, path.resolve(file));
  const excludes = opts.excludes ?? DEFAULT_DSL_EXCLUDES;
  const root = sources.load(text, file, path.resolve(file), []);
  if (sources.diagnostics.length || !root) throw new DslError(sources.diagnostics, sources.lookup, excludes);
  const e = new Elaborator(root, excludes).elaborate(opts);
  if (e.diagnostics.length) throw new DslError(e.diagnostics, sources.lookup, excludes);
  return { graph: e.builder.graph, sources: sources.lookup };
}

/** Compiles model source text into a Graph (see compileModelSourceFull). */
export function compileModelSource(text: string, file: string, opts: LoadOptions = {}): Graph {
  return compileModelSourceFull(text, file, opts).graph;
}

/** Reads, parses and elaborates a `.tg` model file into a Graph; throws DslError on any problem. */
export function loadModelFile(file: string, opts: LoadOptions = {}): Graph {
  return loadModelFileFull(file, opts).graph;
}

export function loadModelFileFull(file: string, opts: LoadOptions = {}): ModelCompilation {
  const read = readWith(opts, path.resolve(file));
  if (!('text' in read)) {
    throw new DslError([error(read.missing ? `cannot read the model file '${file}'` : `cannot read the model file '${file}': ${read.problem}`)], () => undefined);
  }
  return compileModelSourceFull(read.text, file, opts);
}

/** `a.tg → b.tg → ...`, shortened in the middle when long. */
function importChain(files: readonly string[]): string {
  const names = files.map((f) => path.basename(f));
  const shown = names.length > 8 ? [...names.slice(0, 3), '...', ...names.slice(-3)] : names;
  return shown.join(' → ');
}
