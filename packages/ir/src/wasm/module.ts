import { decode } from '@webassemblyjs/wasm-parser';
import type { ModuleField, Signature } from '@webassemblyjs/wasm-parser';
import { FUEL_EXPORT, FUEL_SPENT, FuelError, addFuel } from './fuel.js';

/**
 * Reference kernels written as WebAssembly modules: checked before use, run with bounded memory
 * and a step budget. The calling convention (docs/language.md, "Custom ops"):
 *
 *   entry(in_0, …, in_{k-1}, out_0, …, out_{m-1}, n_in_0, …, n_out_0, …, attr_0, …) -> ()
 *
 * in_i/out_j are i32 byte offsets of float32 arrays in the module's memory, n_* their element
 * counts (i32), and each attribute an f32 (float attribute) or i32 (int attribute). tilegraph
 * writes the inputs from the exported i32 global `__heap_base` when there is one (the linker's
 * convention), else from offset 0, each array 16-byte aligned, growing the memory as needed
 * within its declared maximum. The module may import nothing but its memory, or define and
 * export it; either way the memory must declare a maximum of at most MAX_MEMORY_PAGES pages. It
 * may have no start function.
 */

export const MAX_MODULE_BYTES = 1 << 20;
/** 64 KiB pages: 16 MiB. */
export const MAX_MEMORY_PAGES = 256;
/** Instructions a run may execute (see fuel.ts): about a second of work. */
export const DEFAULT_STEP_BUDGET = 1_000_000_000;

export type WasmParam = 'i32' | 'f32';

/** Something wrong with a module: the message says what (the caller says whose module). */
export class WasmModuleError extends Error {}

export interface CheckedWasm {
  readonly module: WebAssembly.Module;
  readonly entry: string;
  /** The imported memory (module, name, limits) or undefined when the module exports its own. */
  readonly memoryImport?: { readonly module: string; readonly name: string; readonly min: number; readonly max: number };
  /** Export name of the module's own memory. */
  readonly memoryExport?: string;
  readonly heapBase: boolean;
  readonly budget: number;
}

function signatureText(s: { params: readonly string[]; results: readonly string[] }): string {
  return `(${s.params.join(', ')}) -> ${s.results.length === 0 ? '()' : s.results.length === 1 ? s.results[0] : `(${s.results.join(', ')})`}`;
}

const describeImport: Record<string, string> = { Func: 'a function', FuncImportDescr: 'a function', GlobalType: 'a global', Global: 'a global', Table: 'a table', Memory: 'a memory' };

function checkLimits(what: string, limits: { min: number; max?: number }, maxPages: number): number {
  if (limits.max === undefined) throw new WasmModuleError(`${what} declares no maximum size; declare one of at most ${maxPages} pages (${maxPages / 16} MiB), e.g. (memory 1 ${Math.min(16, maxPages)})`);
  if (limits.max > maxPages) throw new WasmModuleError(`${what} declares a maximum of ${limits.max} pages, above the limit of ${maxPages} pages (${maxPages / 16} MiB)`);
  return limits.max;
}

/**
 * Checks a module for use as a reference kernel with exported function `entry` taking `params`
 * and returning nothing, and prepares it with a step budget. Throws WasmModuleError naming the
 * problem; never runs the module's code.
 */
export function checkWasmModule(bytes: Uint8Array, entry: string, params: readonly WasmParam[], budget = DEFAULT_STEP_BUDGET, maxPages = MAX_MEMORY_PAGES): CheckedWasm {
  if (bytes.length > MAX_MODULE_BYTES) throw new WasmModuleError(`is ${bytes.length} bytes, above the limit of ${MAX_MODULE_BYTES} bytes`);
  if (bytes.length < 8 || bytes[0] !== 0 || bytes[1] !== 0x61 || bytes[2] !== 0x73 || bytes[3] !== 0x6d) throw new WasmModuleError('is not a WebAssembly binary (it does not start with \\0asm)');
  if (!WebAssembly.validate(bytes)) {
    let why = '';
    try {
      new WebAssembly.Module(bytes);
    } catch (e) {
      why = `: ${(e as Error).message.replace(/^WebAssembly\.Module\(\): /, '')}`;
    }
    throw new WasmModuleError(`is not a valid WebAssembly module${why}`);
  }
  let fields: readonly ModuleField[];
  try {
    const program = decode(bytes, { ignoreCodeSection: true, ignoreDataSection: true, ignoreCustomNameSection: true });
    fields = program.body[0]?.fields ?? [];
  } catch (e) {
    throw new WasmModuleError(`could not be read: ${(e as Error).message}`);
  }
  let memoryImport: CheckedWasm['memoryImport'];
  const funcs: Signature[] = [];
  let ownMemory: { min: number; max?: number } | undefined;
  const exports = new Map<string, { kind: string; index: number }>();
  for (const f of fields) {
    if (f.type === 'ModuleImport') {
      const kind = f.descr.type;
      if (kind !== 'Memory' || memoryImport) {
        throw new WasmModuleError(`imports '${f.module}.${f.name}' (${describeImport[kind] ?? kind}); a reference kernel may import nothing but its memory`);
      }
      const max = checkLimits(`its imported memory '${f.module}.${f.name}'`, f.descr.limits!, maxPages);
      memoryImport = { module: f.module, name: f.name, min: f.descr.limits!.min, max };
    } else if (f.type === 'Memory') ownMemory = f.limits;
    else if (f.type === 'Func') funcs.push(f.signature);
    else if (f.type === 'Start') throw new WasmModuleError('has a start function; a reference kernel may run code only when its entry is called');
    else if (f.type === 'ModuleExport') exports.set(f.name, { kind: f.descr.exportType, index: f.descr.id.value });
  }
  if (ownMemory) checkLimits('its memory', ownMemory, maxPages);
  let memoryExport: string | undefined;
  if (!memoryImport) {
    if (!ownMemory) throw new WasmModuleError('has no memory; import one as (import "env" "memory" (memory 1 16)) or export its own');
    memoryExport = [...exports].find(([, x]) => x.kind === 'Memory')?.[0];
    if (memoryExport === undefined) throw new WasmModuleError('does not export its memory; add (export "memory" (memory 0))');
  }
  const want = signatureText({ params, results: [] });
  const e = exports.get(entry);
  if (!e || e.kind !== 'Func') {
    const fns = [...exports].filter(([, x]) => x.kind === 'Func').map(([n]) => `'${n}'`);
    throw new WasmModuleError(`does not export a function '${entry}' (${fns.length ? `it exports ${fns.join(', ')}` : 'it exports no functions'}); the kernel must be exported as '${entry}' with signature ${want}`);
  }
  const sig = funcs[e.index];
  if (!sig) throw new WasmModuleError(`exports '${entry}' as function ${e.index}, which it does not define`);
  const have = signatureText({ params: sig.params.map((p) => p.valtype), results: sig.results });
  if (have !== want) throw new WasmModuleError(`exports '${entry}' with signature ${have}, but the kernel must take ${want}`);
  if (exports.has(FUEL_EXPORT)) throw new WasmModuleError(`exports '${FUEL_EXPORT}', a name tilegraph reserves for its step counter`);
  const hb = exports.get('__heap_base');
  let instrumented: WebAssembly.Module;
  try {
    instrumented = new WebAssembly.Module(addFuel(bytes, budget));
  } catch (err) {
    if (err instanceof FuelError) throw new WasmModuleError(err.message);
    throw new WasmModuleError(`could not be prepared with a step counter: ${(err as Error).message}`);
  }
  return { module: instrumented, entry, memoryImport, memoryExport, heapBase: hb?.kind === 'Global', budget };
}

/** An attribute passed to the kernel: an f32 or an i32 parameter. */
export type WasmScalar = number;

/** A run that failed: the message says how (the caller says whose kernel). */
export class WasmRunError extends Error {}

/**
 * Runs the kernel on a fresh instance (so no state leaks between calls): writes the inputs, calls
 * the entry with pointers, counts and attributes, and returns copies of the outputs.
 */
export function runWasmKernel(m: CheckedWasm, inputs: readonly Float32Array[], outputSizes: readonly number[], scalars: readonly WasmScalar[]): Float32Array[] {
  let memory: WebAssembly.Memory;
  let instance: WebAssembly.Instance;
  const fuelLeft = () => (instance?.exports[FUEL_EXPORT] as WebAssembly.Global | undefined)?.value as number | undefined;
  const trapped = (err: unknown, when: string): never => {
    if (fuelLeft() === FUEL_SPENT) throw new WasmRunError(`exceeded its step budget of ${m.budget} instructions`);
    if (err instanceof RangeError && /call stack/i.test(err.message)) throw new WasmRunError(`overflowed the call stack ${when}`);
    throw new WasmRunError(`trapped ${when}: ${(err as Error).message}`);
  };
  try {
    if (m.memoryImport) {
      memory = new WebAssembly.Memory({ initial: m.memoryImport.min, maximum: m.memoryImport.max });
      instance = new WebAssembly.Instance(m.module, { [m.memoryImport.module]: { [m.memoryImport.name]: memory } });
    } else {
      instance = new WebAssembly.Instance(m.module, {});
      memory = instance.exports[m.memoryExport!] as WebAssembly.Memory;
    }
  } catch (err) {
    throw new WasmRunError(`could not be instantiated: ${(err as Error).message}`);
  }
  const align = (x: number) => Math.ceil(x / 16) * 16;
  let at = align(m.heapBase ? Number((instance.exports['__heap_base'] as WebAssembly.Global).value) >>> 0 : 0);
  const place = (n: number) => {
    const p = at;
    at = align(at + 4 * n);
    return p;
  };
  const inPtrs = inputs.map((x) => place(x.length));
  const outPtrs = outputSizes.map((n) => place(n));
  const pages = Math.ceil(at / 65536);
  const have = memory.buffer.byteLength / 65536;
  if (pages > have) {
    try {
      memory.grow(pages - have);
    } catch {
      throw new WasmRunError(`needs ${at} bytes of memory for its tensors, more than its memory's declared maximum allows`);
    }
  }
  inputs.forEach((x, i) => new Float32Array(memory.buffer, inPtrs[i]!, x.length).set(x));
  const fn = instance.exports[m.entry] as (...args: number[]) => void;
  try {
    fn(...inPtrs, ...outPtrs, ...inputs.map((x) => x.length), ...outputSizes, ...scalars);
  } catch (err) {
    trapped(err, 'while running');
  }
  // the kernel may have grown the memory: take the buffer afresh
  return outPtrs.map((p, j) => new Float32Array(memory.buffer.slice(p, p + 4 * outputSizes[j]!)));
}
