import { Graph, Op, Tensor, Value, isGraphAttr } from '@tilegraph/ir';
import { createHash } from 'node:crypto';
import { GraphEmitter, ValueRef } from './context.js';
import { cppComment } from './sanitize.js';
import { scheduleUnits } from './schedule.js';
import { Allocation } from './memory.js';

/**
 * Outlining, as PopART does it: the repeated parts of a graph (the layers of an encoder, a block
 * applied several times) are lowered once, as a `poplar::Function`, and each occurrence becomes
 * copies of its inputs into the function's tensors, a `program::Call` and copies of its results
 * out. Host code, compute sets and vertices then grow with the number of distinct layers, not
 * with their count.
 *
 * Candidates are the ops of one top-level name scope (`encoder.layers.3/...`), the forward, the
 * recomputed (`.../recompute`) and the backward ops (`.../grad`) of a scope apart, and the update
 * of each weight (`<the weight's scope>/update`). Two candidates are the same function when their ops
 * match one for one — kind, attributes, types, placement and how operands connect, inside the
 * candidate or to the same-numbered input — which makes the check structural: scopes only propose.
 */

export interface Region {
  /** The ops in lowering order (their order in the graph). */
  readonly ops: readonly Op[];
  /** Values from outside that the ops read, in first-use order. */
  readonly inputs: readonly Value[];
  /** Values made inside and used outside (or graph outputs), in op order. */
  readonly outputs: readonly Value[];
  readonly cls: OutlineClass;
  /** The IPU all its ops run on. */
  readonly ipu: number;
}

export interface OutlineClass {
  readonly id: number;
  readonly members: Region[];
}

export interface Outlining {
  /** The lowering order, each outlined region's ops in one run. */
  readonly order: readonly Op[];
  /** The region an op belongs to (outlined ops only). */
  readonly regionOf: ReadonlyMap<Op, Region>;
  readonly classes: readonly OutlineClass[];
}

/** Ops that stay in the caller: sources, state writes, side effects and random draws. */
function outlinable(op: Op): boolean {
  if (op.operands.length === 0 && op.kind !== 'constant') return false;
  if (op.kind === 'assign' || op.def.sideEffects) return false;
  // a multi-convolution is lowered as one call with all its convolutions
  if (op.annotations.multiConv) return false;
  return !(op.kind.startsWith('random') || op.kind === 'dropout');
}

/** The part of a layer an op belongs to, by the name scopes the passes give their ops. */
const PARTS = ['recompute', 'grad', 'update'];

/** The candidate an op belongs to: its top-level scope, and which part of the layer it is. */
function candidateKey(op: Op): string | undefined {
  if (!op.scope || !outlinable(op)) return undefined;
  const parts = op.scope.split('/');
  const part = PARTS.find((x) => parts.includes(x));
  // a weight's update alone: a layer's updates together would hold all its new weights and
  // optimizer state at once, where one after another each is written as soon as it is made
  if (part === 'update') return op.scope;
  return part ? `${parts[0]}#${part}` : parts[0];
}

function attrKey(v: unknown): string {
  if (isGraphAttr(v)) return graphKey(v);
  if (v instanceof Tensor) {
    const h = createHash('sha1').update(Buffer.from(v.data.buffer, v.data.byteOffset, v.data.byteLength)).digest('hex');
    return `tensor(${v.dtype},${v.shape.join('x')},${h})`;
  }
  if (ArrayBuffer.isView(v)) return `[${Array.from(v as unknown as ArrayLike<number>).join(',')}]`;
  if (Array.isArray(v)) return `[${v.map(attrKey).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${k}:${attrKey((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'undefined';
}

const typeKey = (v: Value) => `${v.type.dtype}[${v.type.shape.join(',')}]`;

/** The inputs, outputs and structural signature of a candidate's ops. */
function describe(ops: readonly Op[], graphOutputs: ReadonlySet<Value>) {
  const index = new Map<Op, number>(ops.map((op, i) => [op, i]));
  const inputs: Value[] = [];
  const inputIndex = new Map<Value, number>();
  const parts: string[] = [];
  for (const op of ops) {
    const a = op.annotations;
    const operands = op.operands.map((v) => {
      const at = index.get(v.producer);
      if (at !== undefined) return `i${at}.${v.producer.results.indexOf(v)}`;
      let k = inputIndex.get(v);
      if (k === undefined) {
        k = inputs.length;
        inputs.push(v);
        inputIndex.set(v, k);
      }
      return `e${k}:${typeKey(v)}`;
    });
    // the IPU is not part of it: one body serves the members on every IPU
    const placement = attrKey({ matmulPass: a.matmulPass, convPass: a.convPass, serialize: a.serialize, recompute: a.recompute });
    parts.push(`${op.kind}(${operands.join(',')})${attrKey(op.attrs)}${placement}->${op.results.map(typeKey).join(',')}`);
  }
  // results read outside, as `op.result` positions
  const used = new Set<string>();
  ops.forEach((op, i) =>
    op.results.forEach((r, k) => {
      if (graphOutputs.has(r) || r.uses.some((u) => !index.has(u.op))) used.add(`${i}.${k}`);
    }),
  );
  return { inputs, used, signature: parts.join(';') };
}

/** A loop body's structure, as describe() gives an op list's (not its names: each layer's loop has its own). */
function graphKey(g: Graph): string {
  const ops = g.topologicalOrder() ?? [...g.ops];
  const index = new Map(ops.map((op, i) => [op, i]));
  const outputs = g.outputs.map((o) => `${index.get(o.value.producer)}.${o.value.resultIndex}`).join(',');
  return `graph(${createHash('sha1').update(`${describe(ops, new Set()).signature}=>${outputs}`).digest('hex')})`;
}

/**
 * Whether the ops can run as one unit: no path leaves them and comes back (through other ops),
 * so that every input exists before the first and no outside op needs a result in between.
 */
function isConvex(ops: ReadonlySet<Op>): boolean {
  const seen = new Set<Op>();
  const stack: Op[] = [];
  for (const op of ops) for (const r of op.results) for (const u of r.uses) if (!ops.has(u.op)) stack.push(u.op);
  while (stack.length) {
    const op = stack.pop()!;
    if (seen.has(op)) continue;
    seen.add(op);
    for (const r of op.results) {
      for (const u of r.uses) {
        if (ops.has(u.op)) return false;
        if (!seen.has(u.op)) stack.push(u.op);
      }
    }
  }
  return true;
}

/** Smallest candidate worth a function (fewer ops cost more in copies than they save). */
const MIN_REGION_OPS = 4;

/**
 * Finds the repeated regions of a graph and an order that lowers each region's ops together.
 * `order` is the schedule the generator would use without outlining; it is kept otherwise.
 */
export function planOutlining(g: Graph, order: readonly Op[]): Outlining {
  const keyOf = new Map<Op, string>();
  for (const op of order) {
    const k = candidateKey(op);
    if (k !== undefined) keyOf.set(op, k);
  }
  // ops without a scope between ops of one candidate (autograd's sums of gradient contributions)
  // join it
  for (const op of order) {
    if (keyOf.has(op) || op.scope || !outlinable(op) || op.operands.length === 0) continue;
    const near = new Set<string | undefined>();
    for (const v of op.operands) if (v.producer.operands.length > 0) near.add(keyOf.get(v.producer));
    for (const r of op.results) for (const u of r.uses) near.add(keyOf.get(u.op));
    if (near.size === 1 && !near.has(undefined)) keyOf.set(op, [...near][0]!);
  }
  const byKey = new Map<string, Op[]>();
  for (const op of order) {
    const k = keyOf.get(op);
    if (k === undefined) continue;
    let list = byKey.get(k);
    if (!list) byKey.set(k, (list = []));
    list.push(op);
  }
  const position = new Map<Op, number>(order.map((op, i) => [op, i]));
  const graphOutputs = new Set(g.outputs.map((o) => o.value));
  const bySignature = new Map<string, { ops: Op[]; inputs: Value[]; used: Set<string> }[]>();
  for (const list of byKey.values()) {
    if (list.length < MIN_REGION_OPS) continue;
    const ops = [...list].sort((a, b) => position.get(a)! - position.get(b)!);
    const ipus = new Set(ops.map((op) => op.annotations.ipu ?? 0));
    if (ipus.size !== 1 || !isConvex(new Set(ops))) continue;
    const d = describe(ops, graphOutputs);
    let same = bySignature.get(d.signature);
    if (!same) bySignature.set(d.signature, (same = []));
    same.push({ ops, inputs: d.inputs, used: d.used });
  }
  const classes: OutlineClass[] = [];
  const regionOf = new Map<Op, Region>();
  for (const same of bySignature.values()) {
    if (same.length < 2) continue;
    // every member returns the results any member's caller uses (the last layer's output may
    // have other readers than the others')
    const used = new Set(same.flatMap((x) => [...x.used]));
    if (used.size === 0) continue;
    const cls: OutlineClass = { id: classes.length, members: [] };
    classes.push(cls);
    for (const s of same) {
      const outputs = [...used].map((at) => {
        const [i, k] = at.split('.').map(Number);
        return s.ops[i!]!.results[k!]!;
      });
      const region: Region = { ops: s.ops, inputs: s.inputs, outputs, cls, ipu: s.ops[0]!.annotations.ipu ?? 0 };
      cls.members.push(region);
      for (const op of s.ops) regionOf.set(op, region);
    }
  }
  if (classes.length === 0) return { order, regionOf, classes };
  return { order: groupRegions(order, regionOf), regionOf, classes };
}

/** The schedule with each region's ops in one run (see scheduleUnits). */
function groupRegions(order: readonly Op[], regionOf: ReadonlyMap<Op, Region>): Op[] {
  const out = scheduleUnits(order, (op) => regionOf.get(op)?.ops);
  if (!out) throw new Error('internal: outlined regions form a cycle');
  return out;
}

/** Where the body of a class's function is in the memory plan, to be counted again for each call. */
interface BodyBuffer {
  readonly buffer: Allocation;
  /** Ticks of the body (0 = its start) it is live over; undefined for always-live memory. */
  readonly live?: readonly [number, number];
}

/**
 * How a class is outlined. `function`: one poplar::Function, built once per IPU and called with
 * its inputs copied in and its results copied out; host code, vertices and device code are
 * shared. `builder`: a C++ function that adds the ops to the program for each occurrence, on the
 * occurrence's own tensors; only the host code is shared, and nothing is copied. Which one:
 * copies cost a region its inputs' and results' memory again while it runs, which a layer whose
 * weights (and optimizer state) dwarf its working memory cannot afford, as PopART prunes
 * outlining candidates whose copies cost too much.
 */
export type OutlineMode = 'function' | 'builder';

/** Largest share of a function's memory its copies may take. */
const MAX_COPY_SHARE = 0.25;

const valueBytes = (v: Value) => v.type.shape.reduce((a, b) => a * b, 1) * 4;

/** `function` when the copies of a call are small beside what the region makes inside. */
export function outlineMode(r: Region): OutlineMode {
  const io = [...r.inputs, ...r.outputs].reduce((a, v) => a + valueBytes(v), 0);
  const outputs = new Set(r.outputs);
  const inside = r.ops.flatMap((op) => op.results).reduce((a, v) => a + (outputs.has(v) ? 0 : valueBytes(v)), 0);
  return io <= MAX_COPY_SHARE * (io + inside) ? 'function' : 'builder';
}

/** The function of a class: its body lowered once, built on each IPU a member runs on. */
export interface OutlinedFunction {
  /** The C++ function: builds the poplar::Function on a virtual graph, or adds the ops to a program. */
  readonly name: string;
  /** The occurrence it was lowered from. */
  readonly first: Region;
  readonly mode: OutlineMode;
  /** The memory its body allocates, and the ops of its ticks. */
  readonly body: readonly BodyBuffer[];
  readonly ticks: readonly (Op | undefined)[];
  /** builder: the memory the first occurrence's inputs read, and its results' refs. */
  readonly inputBuffers: readonly (readonly Allocation[])[];
  readonly results: readonly ValueRef[];
  /** function: the built function (a C++ variable) on each IPU. */
  readonly built: Map<number, string>;
}

const scopeOf = (r: Region) => r.ops[0]!.scope.split('/')[0]!;

/**
 * Lowers `region`'s ops once as the body of a C++ function `name` at file scope, on virtual graph
 * `g`: in `function` mode it builds a poplar::Function reading parameter tensors in place of the
 * region's inputs; in `builder` mode it adds the ops to the caller's program on the tensors it is
 * given. `lowerOp` lowers one op as the graph would, `closeOps` finishes what it holds back (fused
 * groups). The first occurrence (`region`) is counted in the memory plan here.
 */
export function lowerFunction(e: GraphEmitter, region: Region, name: string, mode: OutlineMode, lowerOp: (op: Op) => void, closeOps: () => void): OutlinedFunction {
  e.closeComputeSet();
  const ipu = region.ipu;
  // a builder reads the caller's tensors: made (constants) and copied to this IPU out here
  const args = mode === 'builder' ? region.inputs.map((v) => e.tensor(v, ipu)) : [];
  const argRefs = mode === 'builder' ? region.inputs.map((v) => e.ref(v)) : [];
  const touchedBefore = new Set(e.touches.keys());
  const allocatedBefore = e.mc.memory.buffers.length;
  // the body's ops are in the program when a call runs them, not here
  const onEmitted = e.onEmitted;
  e.onEmitted = undefined;
  const start = e.lines.length;
  const tick0 = e.now;
  const params = mode === 'function' ? region.inputs.map((v, i) => e.newTensor(v.type.dtype, v.type.shape, ipu, `${name} parameter ${i}`, `param${i}`)) : region.inputs.map((_, i) => `in[${i}]`);
  // (no `constant`: a value folded into the code would be the first occurrence's for all; a
  // builder's inputs are not `whole`: a result laid out like one would be laid out like the first
  // occurrence's input in the plan, and like each occurrence's own on the device)
  const restore = region.inputs.map((v, i) =>
    e.substitute(
      v,
      mode === 'function'
        ? { expr: params[i]!, ipu, roots: new Set(), buffers: [e.bufferNamed(params[i]!)!], whole: true }
        : { expr: params[i]!, ipu, roots: argRefs[i]!.roots, buffers: argRefs[i]!.buffers ?? [], whole: false },
    ),
  );
  for (const op of region.ops) lowerOp(op);
  closeOps();
  e.closeComputeSet();
  const results = region.outputs.map((v) => e.tensor(v, ipu));
  const resultRefs = region.outputs.map((v) => ({ ...e.ref(v) }));
  for (const r of restore.reverse()) r();
  e.onEmitted = onEmitted;
  const graph = new RegExp(`d\\.ipu\\[${ipu}\\]`, 'g');
  const lines = e.lines.splice(start).map((l) => l.replace(graph, 'g'));
  const others = region.cls.members.length - 1;
  const what = `the ${region.ops.length} ops of ${cppComment(scopeOf(region), 60)}, and of ${others} more with the same structure`;
  const signature =
    mode === 'function'
      ? `OutlinedFunction ${name}(Device &d, poplar::Graph &g)`
      : `std::vector<poplar::Tensor> ${name}(Device &d, poplar::Graph &g, poplar::program::Sequence &prog, std::initializer_list<TensorRef> args)`;
  const text = (
    mode === 'function'
      ? [
          `// ${what}, as a function on virtual graph g`,
          `${signature} {`,
          '  poplar::program::Sequence prog;',
          ...lines,
          `  return {d.graph.addFunction(prog), {${params.join(', ')}}, {${results.join(', ')}}};`,
          '}',
        ]
      : [`// ${what}: added to prog on virtual graph g, reading the tensors args`, `${signature} {`, '  const TensorRefs in(args.begin());', ...lines, `  return {${results.join(', ')}};`, '}']
  ).join('\n');
  e.mc.functionBodies.push({ signature, text });
  const body: BodyBuffer[] = e.mc.memory.buffers.slice(allocatedBefore).map((b) => {
    const r = e.touches.get(b);
    return r && !touchedBefore.has(b) && !b.alwaysLive ? { buffer: b, live: [r[0] - tick0, r[1] - tick0] as const } : { buffer: b };
  });
  const fn: OutlinedFunction = {
    name,
    first: region,
    mode,
    body,
    ticks: e.opAt.slice(tick0 + 1),
    inputBuffers: argRefs.map((r) => r.buffers ?? []),
    results: resultRefs,
    built: new Map(),
  };
  if (mode === 'function') fn.built.set(ipu, build(e, fn, ipu));
  else callBuilder(e, region, fn, args, resultRefs);
  return fn;
}

/** Builds the function on `ipu` (a C++ variable). */
function build(e: GraphEmitter, fn: OutlinedFunction, ipu: number): string {
  const v = `${fn.name}_ipu${ipu}`;
  e.emit(`const OutlinedFunction ${v} = ${fn.name}(d, ${e.g(ipu)});`);
  return v;
}

/**
 * Counts the body's memory again for an occurrence: its always-live memory (vertex state,
 * constants) when `always` (a builder's every call, a function's first on an IPU), the rest over
 * the same ticks as when it was lowered, from now on. Returns the copies by original.
 */
function countAgain(e: GraphEmitter, fn: OutlinedFunction, region: Region, always: boolean): Map<Allocation, Allocation> {
  // the occurrence's own ops are blamed, and its own values named
  const ops = new Map<Op | undefined, Op>(fn.first.ops.map((op, i) => [op, region.ops[i]!]));
  const base = e.now;
  for (const op of fn.ticks) {
    e.now++;
    e.opAt.push(ops.get(op) ?? op);
  }
  const copies = new Map<Allocation, Allocation>();
  for (const { buffer, live } of fn.body) {
    if (!live && !always) continue;
    const blame = ops.get(buffer.blame);
    const copy = e.mc.memory.duplicate(buffer, region.ipu, blame ?? buffer.blame, blame ? relabel(e, buffer.label, buffer.blame!, blame) : buffer.label);
    copies.set(buffer, copy);
    if (live) e.touches.set(copy, [base + live[0], base + live[1]]);
  }
  return copies;
}

/** `label` of memory `from` made, as `to` (its counterpart in another occurrence) would name it. */
function relabel(e: GraphEmitter, label: string, from: Op, to: Op): string {
  for (let k = 0; k < from.results.length; k++) {
    const old = e.valueLabel(from.results[k]!);
    if (label === old || (label.startsWith(old) && /^[/@ ]/.test(label.slice(old.length)))) return e.valueLabel(to.results[k]!) + label.slice(old.length);
  }
  return label;
}

/** A builder's call: its results are the occurrence's values (refs made like the body's). */
function callBuilder(e: GraphEmitter, region: Region, fn: OutlinedFunction, args: readonly string[], results: readonly ValueRef[]): void {
  const ipu = region.ipu;
  e.current = region.ops[0];
  const r = e.local('r');
  e.comment(`${scopeOf(region)}: ${fn.name}`);
  e.emit(`const auto ${r} = ${fn.name}(d, ${e.g(ipu)}, prog, {${args.join(', ')}});`);
  region.outputs.forEach((v, j) => {
    e.callResults.set(`${r}[${j}]`, [r, j]);
    e.rebind(v, { ...results[j]!, expr: `${r}[${j}]` });
  });
}

/** One occurrence of an outlined region after the first (whose code is its body). */
export function callFunction(e: GraphEmitter, region: Region, fn: OutlinedFunction, first: boolean): void {
  const ipu = region.ipu;
  if (fn.mode === 'builder') {
    if (first) return; // lowering it was its call
    const args = region.inputs.map((v) => e.tensor(v, ipu));
    const argRefs = region.inputs.map((v) => e.ref(v));
    const copies = countAgain(e, fn, region, true);
    // the first occurrence's inputs stand for this one's
    fn.inputBuffers.forEach((bs, i) => bs.forEach((b, k) => copies.set(b, argRefs[i]!.buffers?.[k] ?? b)));
    const roots = new Set(argRefs.flatMap((r) => [...r.roots]));
    // the results live where this occurrence ran, which need not be the IPU of the first
    const results = fn.results.map((r) => ({ ...r, ipu, roots: r.roots.size ? roots : r.roots, buffers: (r.buffers ?? []).map((b) => copies.get(b) ?? b) }));
    callBuilder(e, region, fn, args, results);
    return;
  }
  let built = fn.built.get(ipu);
  // the first call's memory was counted as its body was lowered
  if (!first) {
    const fresh = built === undefined;
    if (!built) fn.built.set(ipu, (built = build(e, fn, ipu)));
    countAgain(e, fn, region, fresh);
  }
  e.current = region.ops[0];
  const args = region.inputs.map((v) => e.tensor(v, ipu));
  const r = e.local('r');
  e.comment(`${scopeOf(region)}: ${fn.name}`);
  e.emit(`const auto ${r} = callFunction(${e.g(ipu)}, prog, ${built}, {${args.join(', ')}}, ${e.debugName(scopeOf(region))});`);
  region.outputs.forEach((v, j) => {
    e.callResults.set(`${r}[${j}]`, [r, j]);
    e.adopt(v, `${r}[${j}]`, ipu);
  });
}
