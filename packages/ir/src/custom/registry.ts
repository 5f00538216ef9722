import { DiagnosticError, error } from '../diagnostics.js';
import type { Value } from '../graph.js';
import type { GraphBuilder } from '../builder.js';
import type { Location } from '../location.js';
import { ShapeError, TensorType, formatType, shapeLimitProblem } from '../shape.js';
import { CheckedWasm, DEFAULT_STEP_BUDGET, WasmModuleError, WasmParam, checkWasmModule } from '../wasm/module.js';

/**
 * Custom ops (PopTorch's custom_op, PopART custom ops): registered once with their result types,
 * a Poplar codelet, a WebAssembly reference kernel and optionally a gradient; the IR op `custom`
 * (ops/custom.ts) names a registration by name, domain and version.
 */

export const DEFAULT_CUSTOM_DOMAIN = 'custom.ops';

export interface CustomAttribute {
  readonly name: string;
  /** Passed to the codelet field of that name and to the reference kernel as an f32 or an i32. */
  readonly type: 'float' | 'int';
  readonly default?: number;
}

export type CustomShapeFunction = (inputs: readonly TensorType[], attrs: Readonly<Record<string, number>>) => readonly TensorType[];

export interface CustomGradContext {
  readonly b: GraphBuilder;
  readonly inputs: readonly Value[];
  readonly outputs: readonly Value[];
  /** The loss gradient of each result (zeros where a result does not reach the loss). */
  readonly outputGrads: readonly Value[];
  readonly attrs: Readonly<Record<string, number>>;
}

export interface CustomOpSpec {
  readonly name: string;
  readonly domain?: string;
  readonly domainVersion?: number;
  /** Names of the operands (all float32 tensors). */
  readonly inputs: readonly string[];
  readonly attributes?: readonly CustomAttribute[];
  /** Example outputs (fixed result types), or a count and a shape function. */
  readonly outputs: readonly TensorType[] | { readonly count: number; readonly infer: CustomShapeFunction };
  readonly codelet: {
    /** C++ source defining the vertex class (a poplar::Vertex subclass). */
    readonly source: string;
    /** Where the source came from, for messages. */
    readonly file?: string;
    readonly vertex: string;
    /** Vertex fields the operands, results and attributes connect to (default: their names; results: out0, out1, ...). */
    readonly inputs?: readonly string[];
    readonly outputs?: readonly string[];
    readonly attributes?: readonly string[];
  };
  readonly reference: {
    readonly wasm: Uint8Array;
    readonly file?: string;
    readonly entry: string;
    /** Calls plus loop iterations one run may take. */
    readonly stepBudget?: number;
  };
  /**
   * Gradient: the name of another custom op of the same domain and version taking
   * (inputs..., outputs..., output gradients...) with the same attributes and returning one
   * gradient per input; or a function composing ops; or 'none' (not differentiable).
   */
  readonly gradient?: string | 'none' | ((ctx: CustomGradContext) => readonly (Value | undefined)[]);
}

/** A checked registration. */
export interface CustomOp {
  readonly spec: CustomOpSpec;
  readonly name: string;
  readonly domain: string;
  readonly version: number;
  readonly attributes: readonly CustomAttribute[];
  readonly outputCount: number;
  readonly fields: { readonly inputs: readonly string[]; readonly outputs: readonly string[]; readonly attributes: readonly string[] };
  readonly wasm: CheckedWasm;
}

const registry = new Map<string, CustomOp>();

function key(name: string, domain: string, version: number): string {
  return `${domain}\u0000${name}\u0000${version}`;
}

/** How messages name a custom op: domain::name (version v). */
export function customOpLabel(name: string, domain: string, version: number): string {
  return `'${domain}::${name}' (version ${version})`;
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** Includes codelets.cpp makes already (the lowering drops them); any other would be pasted inside namespace tg. */
export const PROVIDED_CODELET_INCLUDE = /^\s*#\s*include\s*[<"](poplar\/Vertex\.hpp|cmath)[>"]\s*$/;

function checkCodelet(spec: CustomOpSpec, fields: CustomOp['fields'], fail: (m: string, notes?: string[]) => never): void {
  const c = spec.codelet;
  const where = c.file ? ` (${c.file})` : '';
  if (!IDENT.test(c.vertex)) fail(`codelet vertex class name '${c.vertex}' is not a C++ identifier`);
  if (!new RegExp(`\\b(class|struct)\\s+${c.vertex}\\b`).test(c.source)) fail(`codelet source${where} does not define class '${c.vertex}'`);
  for (const line of c.source.split('\n')) {
    if (/^\s*#\s*include/.test(line) && !PROVIDED_CODELET_INCLUDE.test(line)) {
      fail(`codelet source${where} includes '${line.trim()}'`, ['codelets.cpp already includes <poplar/Vertex.hpp> and <cmath>; a codelet may use nothing else']);
    }
  }
  const all = [...fields.inputs, ...fields.outputs, ...fields.attributes];
  for (const f of all) {
    if (!IDENT.test(f)) fail(`codelet field name '${f}' is not a C++ identifier`);
    if (!new RegExp(`\\b${f}\\b`).test(c.source)) fail(`codelet source${where} has no field '${f}' for vertex '${c.vertex}'`);
  }
  if (new Set(all).size !== all.length) fail(`codelet field names repeat: ${all.join(', ')}`);
}

/** The settings a registration may have, object by object. */
function specKeys(spec: CustomOpSpec): [string, object | undefined, readonly string[]][] {
  return [
    ['the registration', spec, ['name', 'domain', 'domainVersion', 'inputs', 'attributes', 'outputs', 'codelet', 'reference', 'gradient']],
    ['codelet', spec.codelet, ['source', 'file', 'vertex', 'inputs', 'outputs', 'attributes']],
    ['reference', spec.reference, ['wasm', 'file', 'entry', 'stepBudget']],
    ...(spec.attributes ?? []).map((a, i): [string, object, readonly string[]] => [`attribute ${i}`, a, ['name', 'type', 'default']]),
  ];
}

/** Whether two registrations say the same (a model loaded twice registers its ops twice). */
function sameRegistration(a: CustomOpSpec, b: CustomOpSpec): boolean {
  if (a === b) return true;
  const plain = (s: CustomOpSpec) =>
    JSON.stringify([s.inputs, s.attributes ?? [], Array.isArray(s.outputs) ? s.outputs : (s.outputs as { count: number }).count, s.codelet.source, s.codelet.vertex, s.codelet.inputs, s.codelet.outputs, s.codelet.attributes, s.reference.entry, s.reference.stepBudget, typeof s.gradient === 'function' ? null : s.gradient]);
  const sameBytes = a.reference.wasm.length === b.reference.wasm.length && a.reference.wasm.every((x, i) => x === b.reference.wasm[i]);
  const fn = (s: CustomOpSpec) => (Array.isArray(s.outputs) ? undefined : (s.outputs as { infer: CustomShapeFunction }).infer);
  const sameFns = fn(a) === fn(b) && (typeof a.gradient !== 'function' || a.gradient === b.gradient);
  return sameBytes && sameFns && plain(a) === plain(b);
}

/** The reference kernel's parameter types: pointers and counts (i32), then one per attribute. */
export function customKernelParams(nIn: number, nOut: number, attributes: readonly CustomAttribute[]): WasmParam[] {
  return [...Array<WasmParam>(2 * (nIn + nOut)).fill('i32'), ...attributes.map((a): WasmParam => (a.type === 'float' ? 'f32' : 'i32'))];
}

/**
 * Registers a custom op after checking the registration and its WebAssembly module. Registering
 * the same name, domain and version again replaces nothing: it must be the same registration.
 * Throws DiagnosticError (at `loc`) naming the problem.
 */
export function registerCustomOp(spec: CustomOpSpec, loc?: Location): CustomOp {
  const domain = spec.domain ?? DEFAULT_CUSTOM_DOMAIN;
  const version = spec.domainVersion ?? 1;
  const label = customOpLabel(spec.name, domain, version);
  const fail = (m: string, notes?: string[]): never => {
    throw new DiagnosticError(error(`custom op ${label}: ${m}`, loc, notes));
  };
  if (!spec.name || typeof spec.name !== 'string') fail('needs a name');
  // a misspelt key would otherwise be ignored
  for (const [what, obj, known] of specKeys(spec)) {
    for (const k of Object.keys(obj ?? {})) if (!known.includes(k)) fail(`${what} has no setting '${k}' (settings: ${known.join(', ')})`);
  }
  if (!Number.isInteger(version) || version < 1) fail(`domain version must be a positive integer, got ${version}`);
  // the parts the rest reads, of the right kinds (a registration may come from JavaScript)
  if (!Array.isArray(spec.inputs) || !spec.inputs.every((x) => typeof x === 'string')) fail('inputs must be a list of input names');
  if (typeof spec.codelet !== 'object' || spec.codelet === null || typeof spec.codelet.source !== 'string' || typeof spec.codelet.vertex !== 'string') {
    fail("codelet must give the vertex's C++ source and its class name (codelet.source, codelet.vertex)");
  }
  if (typeof spec.reference !== 'object' || spec.reference === null || !(spec.reference.wasm instanceof Uint8Array) || typeof spec.reference.entry !== 'string') {
    fail("reference must give the module's bytes (a Uint8Array) and the name of its entry point (reference.wasm, reference.entry)");
  }
  if (!Array.isArray(spec.outputs) && (typeof spec.outputs !== 'object' || typeof (spec.outputs as { infer?: unknown }).infer !== 'function')) {
    fail('outputs must be example outputs (a list of types) or { count, infer } with a shape function');
  }
  const known = registry.get(key(spec.name, domain, version));
  if (known) {
    if (sameRegistration(known.spec, spec)) return known;
    fail('is registered already', ['give the new op another name or domain version']);
  }
  if (spec.inputs.length === 0) fail('needs at least one input');
  const attributes = spec.attributes ?? [];
  const names = [...spec.inputs, ...attributes.map((a) => a.name)];
  if (new Set(names).size !== names.length) fail(`input and attribute names repeat: ${names.join(', ')}`);
  for (const a of attributes) {
    if (a.type !== 'float' && a.type !== 'int') fail(`attribute '${a.name}' has type '${String(a.type)}'; use 'float' or 'int'`);
    if (a.default !== undefined && a.type === 'int' && !Number.isInteger(a.default)) fail(`attribute '${a.name}' is an int but its default is ${a.default}`);
  }
  const outputCount = Array.isArray(spec.outputs) ? spec.outputs.length : (spec.outputs as { count: number }).count;
  if (!Number.isInteger(outputCount) || outputCount < 1) fail('needs at least one output');
  if (Array.isArray(spec.outputs)) {
    for (const t of spec.outputs as readonly TensorType[]) {
      if (t.dtype !== 'float32') fail(`output type ${formatType(t)} is not float32 (custom ops take and make float32 tensors)`);
      const p = shapeLimitProblem(t.shape);
      if (p) fail(`output type ${formatType(t)}: ${p}`);
    }
  }
  const fields = {
    inputs: spec.codelet.inputs ?? spec.inputs,
    outputs: spec.codelet.outputs ?? Array.from({ length: outputCount }, (_, i) => `out${i}`),
    attributes: spec.codelet.attributes ?? attributes.map((a) => a.name),
  };
  if (fields.inputs.length !== spec.inputs.length) fail(`codelet names ${fields.inputs.length} input fields for ${spec.inputs.length} inputs`);
  if (fields.outputs.length !== outputCount) fail(`codelet names ${fields.outputs.length} output fields for ${outputCount} outputs`);
  if (fields.attributes.length !== attributes.length) fail(`codelet names ${fields.attributes.length} attribute fields for ${attributes.length} attributes`);
  checkCodelet(spec, fields, fail);
  const g = spec.gradient;
  if (g !== undefined && g !== 'none' && typeof g !== 'string' && typeof g !== 'function') fail('gradient must be a custom op name, a function or "none"');
  let wasm: CheckedWasm;
  try {
    wasm = checkWasmModule(spec.reference.wasm, spec.reference.entry, customKernelParams(spec.inputs.length, outputCount, attributes), spec.reference.stepBudget ?? DEFAULT_STEP_BUDGET);
  } catch (e) {
    if (e instanceof WasmModuleError) return fail(`reference module${spec.reference.file ? ` ${spec.reference.file}` : ''} ${e.message}`);
    throw e;
  }
  const op: CustomOp = { spec, name: spec.name, domain, version, attributes, outputCount, fields, wasm };
  registry.set(key(spec.name, domain, version), op);
  return op;
}

/** The registration an IR op names; ShapeError when there is none. */
export function lookupCustomOp(name: string, domain: string, version: number): CustomOp {
  const op = registry.get(key(name, domain, version));
  if (op) return op;
  const others = [...registry.values()].filter((o) => o.name === name).map((o) => customOpLabel(o.name, o.domain, o.version));
  throw new ShapeError(
    `no custom op ${customOpLabel(name, domain, version)} is registered${others.length ? ` (registered: ${others.join(', ')})` : ''}; register it first (registerCustomOp)`,
  );
}

/** The registration of a domain and op type whatever its version (ONNX nodes name no version): the highest. */
export function findCustomOp(name: string, domain: string): CustomOp | undefined {
  let best: CustomOp | undefined;
  for (const o of registry.values()) if (o.name === name && o.domain === domain && (!best || o.version > best.version)) best = o;
  return best;
}

/** Every registration (for listing in messages and tests). */
export function registeredCustomOps(): CustomOp[] {
  return [...registry.values()];
}

/** Attribute values in registration order, defaults filled; ShapeError for a missing or mistyped one. */
export function customAttrValues(op: CustomOp, given: Readonly<Record<string, number>>): number[] {
  for (const k of Object.keys(given)) {
    if (!op.attributes.some((a) => a.name === k)) {
      throw new ShapeError(`custom op ${customOpLabel(op.name, op.domain, op.version)} has no attribute '${k}' (attributes: ${op.attributes.map((a) => a.name).join(', ') || 'none'})`);
    }
  }
  return op.attributes.map((a) => {
    const v = given[a.name] ?? a.default;
    if (v === undefined) throw new ShapeError(`custom op ${customOpLabel(op.name, op.domain, op.version)} needs attribute '${a.name}'`);
    if (typeof v !== 'number' || (a.type === 'int' && !Number.isInteger(v))) throw new ShapeError(`attribute '${a.name}' must be ${a.type === 'int' ? 'an integer' : 'a number'}, got ${String(v)}`);
    return v;
  });
}

/**
 * The IR attributes of a call of a registered custom op with attributes given by name (defaults
 * filled); ShapeError when the op is not registered or an attribute is wrong.
 */
export function customOpAttrs(name: string, domain: string, version: number, given: Readonly<Record<string, number>>): { name: string; domain: string; version: number; attributes: number[] } {
  return { name, domain, version, attributes: customAttrValues(lookupCustomOp(name, domain, version), given) };
}
