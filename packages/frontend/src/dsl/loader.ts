import { readFileSync, realpathSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Diagnostic, Graph, SourceLookup, error } from '@tilegraph/ir';
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
    return realpathSync.native(p);
  } catch {
    return path.resolve(p);
  }
}

/** Whether `file` is `dir` or lies inside it (paths already resolved). */
export function isInside(file: string, dir: string): boolean {
  const rel = path.relative(dir, file);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/** A compiled model: its graph and the source texts its locations refer to. */
export interface ModelCompilation {
  readonly graph: Graph;
  /** Source text of every file read, by the name locations use. */
  readonly sources: SourceLookup;
}

function defaultRead(p: string): string | undefined {
  try {
    return readFileSync(p, 'utf8');
  } catch {
    return undefined;
  }
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
  private readonly read: (p: string) => string | undefined;
  private readonly stdlibDir: string;

  /** Where imports may read: the root file's folder, the standard library, the user's import paths. */
  private readonly roots: string[];

  constructor(opts: LoadOptions, rootFile: string) {
    this.read = opts.readFile ?? defaultRead;
    this.stdlibDir = opts.stdlibDir ?? STDLIB_DIR;
    this.roots = [path.dirname(rootFile), this.stdlibDir, ...(opts.importPaths ?? [])].map((d) => realOrResolved(path.resolve(d)));
  }

  readonly lookup: SourceLookup = (f) => this.texts.get(f);

  load(text: string, display: string, real: string, stack: string[]): SourceModule | undefined {
    this.texts.set(display, text);
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
      const childDisplay = std ? item.path : path.posix.normalize(path.posix.join(path.posix.dirname(display), item.path));
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
        const childText = this.read(childReal);
        if (childText === undefined) {
          const what = std ? `there is no standard library file '${item.path}' (in ${this.stdlibDir.replace(/[\\/]$/, '')})` : `cannot read '${item.path}' (looked for ${childReal})`;
          this.diagnostics.push({ ...error(what, at), span: item.pos.length });
          this.byReal.set(childReal, null);
          continue;
        }
        child = this.load(childText, childDisplay, childReal, [...stack, real]) ?? null;
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
  const text = (opts.readFile ?? defaultRead)(path.resolve(file));
  if (text === undefined) throw new DslError([error(`cannot read the model file '${file}'`)], () => undefined);
  return compileModelSourceFull(text, file, opts);
}
