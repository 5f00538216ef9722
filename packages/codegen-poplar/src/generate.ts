import {
  CommGroup,
  DType,
  Diagnostic,
  DiagnosticError,
  Graph,
  Module,
  Op,
  ProgramNode,
  drawsRandom,
  ShardPair,
  Value,
  error,
  formatType,
  groupStrideAndSize,
  isFloat,
  isGraphAttr,
  isInteger,
  numElements,
  overlappedStreams,
  Pausable,
  rankInGroup,
  ringCounters,
  runToEnd,
  shapesEqual,
} from '@tilegraph/ir';
import { ALIAS_OPS, GenerateOptions, GraphEmitter, HostFunctionInfo, ModuleContext, OutputInfo, StateInfo, StreamInfo, deviceIpus, shapeLiteral } from './context.js';
import { GRAPH_FILE, HOST_INCLUDES, HOST_SUPPORT_FILES, HostNumerics, OUTLINED_FILE, hostMain } from './host.js';
import { GRAPH_UNIT_BYTES, graphUnit, outlinedLayersUnit } from './units.js';
import { Allocation, GC200, MemoryReport } from './memory.js';
import { fitProblems, planMemory } from './plan.js';
import { generateDeclare, hostFunctionTable, sizeTable } from './declare.js';
import { ioFitProblems, ioTileProblems, ioTransfer, stagesThroughIo } from './io-tiles.js';
import { plannedOperands } from './layout.js';
import { multiConvGroups, orderMultiConvs } from './lower/multiconv.js';
import { chooseMappingOffset, runsOf } from './memory.js';
import { StateWrites, writeCallResult } from './state-writes.js';
import { fixedVertex } from './codelets.js';
import { scheduleGraph } from './schedule.js';
import { OutlineClass, OutlinedFunction, callFunction, lowerFunction, outlineMode, planOutlining } from './outline.js';
import { DECOMPOSED_OPS, LOWERINGS } from './lower/index.js';
import { Fusion, isElementwise } from './lower/elementwise.js';
import { cppComment, cppStringLiteral } from './sanitize.js';
import { DEVICE_TYPE_NAMES, deviceType, isDeviceDType, linearMappingParams } from './types.js';

/** The data the runtime needs to build and drive the executable. */
export interface BuildPlan {
  readonly version: 1;
  readonly module: string;
  readonly replicationFactor: number;
  /** IPUs per replica. */
  readonly ipus: number;
  readonly files: readonly string[];
  /** Vertex names the host program uses (all defined in codelets.cpp). */
  readonly vertices: readonly string[];
  /** Input streams in protocol order; `perRun` micro-batches per replica per run. */
  readonly inputs: readonly (StreamInfo & { readonly perRun: number; readonly bytes: number })[];
  /** Output and print streams in protocol order; `perRun` copies (each of all replicas) per run. */
  readonly outputs: readonly (OutputInfo & { readonly perRun: number; readonly bytes: number })[];
  /** Parameters and variables: host handle `handle` moves replicationFactor × `bytes`. */
  readonly state: readonly (StateInfo & { readonly handle: string; readonly bytes: number })[];
  /** Whether the seed/step handles exist (the module draws random numbers). */
  readonly random: boolean;
  /** CPU ops' host functions, by the index the executable's "call" messages give. */
  readonly hostFunctions: readonly HostFunctionInfo[];
  /** Print streams of each graph in op order. */
  readonly prints: Readonly<Record<string, readonly number[]>>;
  readonly program: ProgramNode;
  readonly memory: MemoryReport;
}

export interface GeneratedSources {
  readonly files: { readonly 'codelets.cpp': string; readonly 'host.cpp': string; readonly 'host_graph.cpp'?: string; readonly 'host_layers.cpp'?: string; readonly 'tilegraph_host.hpp': string; readonly 'tilegraph_host.cpp': string; readonly 'plan.json': string };
  readonly plan: BuildPlan;
  /** Out-of-memory diagnostics, one per IPU that does not fit (only with allowOutOfMemory; else thrown). */
  readonly memoryProblems: readonly Diagnostic[];
  /** The planned allocations with their tile spans and live ranges, for per-tile reports (not in plan.json). */
  readonly allocations: readonly Allocation[];
}

const SOURCE_KINDS = new Set(['input', 'parameter', 'variable', 'constant']);

/** A value of a type the code generator cannot carry, with what to do about it. */
function notDeviceType(kind: string, v: Value, loc: Op['loc']): Diagnostic {
  const d = v.type.dtype;
  const what = v.name ? `'${v.name}' (${kind})` : `the result of ${kind}`;
  const to = isFloat(d) ? 'float16 or float32' : isInteger(d) ? 'int8, uint8 or int32' : 'a device type';
  const why = d === 'float64' ? 'float64 is a host-only type' : isInteger(d) ? '4-bit and 2-bit integers run on the reference interpreter only' : 'low-precision floats run on the reference interpreter only';
  return error(`${what} is ${formatType(v.type)}, which the code generator cannot place on the IPU`, loc, [
    `device types are ${DEVICE_TYPE_NAMES}`,
    `cast it to ${to} before it reaches the device (${why})`,
  ]);
}

/** Rejects what the device cannot run, all problems at once. */
function checkSupported(m: Module): void {
  const ds: Diagnostic[] = [];
  const seenDecomposed = new Set<string>();
  const graphs = [...m.graphs.values()];
  for (let gi = 0; gi < graphs.length; gi++) {
    for (const op of graphs[gi]!.ops) {
      for (const v of Object.values(op.attrs)) if (isGraphAttr(v)) graphs.push(v);
      if (DECOMPOSED_OPS.includes(op.kind)) {
        ds.push(error(`no Poplar lowering for ${op.kind}: run the decompose pass`, op.loc, seenDecomposed.has(op.kind) ? undefined : [`${op.kind} is a composite op; the decompose pass rewrites it into primitives before code generation`]));
        seenDecomposed.add(op.kind);
        continue;
      }
      if (!LOWERINGS[op.kind] && !isElementwise(op)) {
        ds.push(error(`no Poplar lowering for ${op.kind}`, op.loc));
        continue;
      }
      for (const r of op.results) {
        if (!isDeviceDType(r.type.dtype)) ds.push(notDeviceType(op.kind, r, op.loc));
      }
    }
  }
  if (ds.length) throw new DiagnosticError(ds);
}

function maxIpu(m: Module): number {
  let n = 0;
  for (const g of m.graphs.values()) for (const op of g.ops) n = Math.max(n, (op.annotations.ipu ?? 0) + 1);
  return n;
}

/** Collects the module's state, inputs and outputs and counts their memory. */
function declareModule(mc: ModuleContext): void {
  const m = mc.module;
  mc.planned = mc.opts.tileLayout === 'linear' ? new Map() : plannedOperands(m);
  // a planned operand is mapped where poplin (here: poplar-host's PopLibs) maps the shape it creates
  const offsetOf = (key: string) => {
    const p = mc.planned.get(key);
    return p ? chooseMappingOffset(mc.memory.tilesPerIpu, p.createdShape) : undefined;
  };
  const ds: Diagnostic[] = [];
  const firstOp = new Map<string, Op>();
  const homeIpu = new Map<string, number>();
  for (const g of m.graphs.values()) {
    for (const op of g.ops) {
      if (op.kind !== 'parameter' && op.kind !== 'variable' && op.kind !== 'input') continue;
      const key = `${op.kind === 'input' ? 'in' : 'st'}:${op.attrs['name'] as string}`;
      if (!firstOp.has(key)) firstOp.set(key, op);
      if (op.annotations.ipu !== undefined && !homeIpu.has(key)) homeIpu.set(key, op.annotations.ipu);
    }
  }
  for (const v of m.variables.values()) {
    const key = `st:${v.name}`;
    if (!isDeviceDType(v.type.dtype)) {
      ds.push(error(`'${v.name}' is ${formatType(v.type)}, which is not a device type`, firstOp.get(key)?.loc, [`device types are ${DEVICE_TYPE_NAMES}: declare the variable with one of them`]));
      continue;
    }
    const storage = v.location?.transient ? 'transient' : v.location?.offChip ? 'off_chip' : 'on_chip';
    const sharded = v.location?.sharded;
    const R = m.replicationFactor;
    const info: StateInfo = {
      name: v.name,
      index: mc.state.length,
      dtype: v.type.dtype,
      shape: [...v.type.shape],
      role: v.role,
      ipu: homeIpu.get(key) ?? v.ipu ?? 0,
      storage,
      ...(sharded ? { shard: { whole: [...sharded.whole.shape], parts: sharded.parts, rank: Array.from({ length: R }, (_, r) => rankInGroup(v.group, R, r)) } } : {}),
    };
    mc.state.push(info);
    const { grain, minElements } = linearMappingParams(info.dtype);
    const bytes = deviceType(info.dtype).bytes;
    // off-chip and transient state takes tile memory only around its uses (loads, reads, writes, stores)
    const kind = storage === 'on_chip' ? 'state' : 'working';
    mc.stateBuffers.set(v.name, mc.memory.addLinear(kind, info.ipu, numElements(info.shape), bytes, grain, minElements, firstOp.get(key), v.name, offsetOf(key)));
    if (storage === 'off_chip') mc.memory.addRemote(info.ipu, numElements(info.shape) * bytes);
  }
  for (const g of m.graphs.values()) {
    for (const op of g.inputs()) {
      const name = op.attrs['name'] as string;
      const t = op.result.type;
      const known = mc.inputs.find((i) => i.name === name);
      if (known) {
        if (known.dtype !== t.dtype || !shapesEqual(known.shape, t.shape)) ds.push(error(`input '${name}' is declared with different types in different graphs`, op.loc));
        continue;
      }
      const info: StreamInfo = { name, index: mc.inputs.length, dtype: t.dtype, shape: [...t.shape], ipu: homeIpu.get(`in:${name}`) ?? 0 };
      mc.inputs.push(info);
      const { grain, minElements } = linearMappingParams(info.dtype);
      mc.inputBuffers.set(name, mc.memory.addLinear('input', info.ipu, numElements(info.shape), deviceType(info.dtype).bytes, grain, minElements, op, `input ${name}`, offsetOf(`in:${name}`)));
    }
  }
  for (const g of m.graphs.values()) {
    for (const o of g.outputs) {
      const t = o.value.type;
      const known = mc.outputs.find((x) => x.name === o.name);
      if (known) {
        if (known.dtype !== t.dtype || !shapesEqual(known.shape, t.shape)) ds.push(error(`output '${o.name}' has different types in different graphs`, o.value.producer.loc));
        continue;
      }
      mc.outputs.push({ name: o.name, index: mc.outputs.length, dtype: t.dtype, shape: [...t.shape], kind: 'output' });
    }
  }
  for (const [key, p] of mc.planned) {
    const b = key.startsWith('st:') ? mc.stateBuffers.get(key.slice(3)) : mc.inputBuffers.get(key.slice(3));
    if (b) mc.plannedBuffers.set(b, p.op);
  }
  if (ds.length) throw new DiagnosticError(ds);
}

/** Emits one graph as a function returning its program. */
/** Generates one graph's program, pausing every 100 ops (see generatePoplarSteps). */
function* generateGraph(mc: ModuleContext, g: Graph, fn: string): Pausable<{ code: string; prints: number[]; emitter: GraphEmitter }> {
  const e = new GraphEmitter(mc, g);
  const order = scheduleGraph(g);
  if (!order) throw new DiagnosticError(error(`graph '${g.name}' has a cycle`));
  const fusion = new Fusion(e);
  e.squaredOperand = (v) => fusion.squaredOperand(v);
  /**
   * Copies the value of an assign into its state (through a copy when it is a view of state). The
   * copies follow the open compute set (see GraphEmitter.emitAfterComputeSet), so that the
   * independent updates of several states can share one.
   */
  const writeState = (a: Op, stage: (src: string, from: readonly Allocation[]) => void = (src, from) => emitWrite(a, src, from)) => {
    const v: Value = a.operands[0]!;
    if (numElements(v.type.shape) === 0) return;
    const r = e.ref(v);
    let src = e.tensor(v, r.ipu);
    let from = r.buffers ?? [];
    if (r.roots.size > 0) {
      // a view of state: copy first, so that no assignment reads state already overwritten
      e.current = a;
      const tmp = e.newTensor(v.type.dtype, v.type.shape, r.ipu, `assign ${a.attrs['name'] as string}`);
      const b = e.bufferNamed(tmp)!;
      e.emitAfterComputeSet([`prog.add(poplar::program::Copy(${src}, ${tmp}));`], from, [b], 0);
      src = tmp;
      from = [b];
    }
    stage(src, from);
  };
  const emitWrite = (a: Op, src: string, from: readonly Allocation[]) => {
    const s = mc.stateIndex(a.attrs['name'] as string);
    const target = mc.stateBuffers.get(s.name);
    if (target) e.touch([target]); // off-chip and transient state is live from its writes on
    if (writeCallResult(e, src, s.index)) return;
    const bytes = numElements(s.shape) * deviceType(s.dtype).bytes;
    e.emitAfterComputeSet([`// ${cppComment(`assign ${s.name}`)}`, `prog.add(poplar::program::Copy(${src}, d.state[${s.index}]));`], from, target ? [target] : [], bytes);
  };
  const writes = new StateWrites(g, e, (a) => {
    e.current = a;
    writeState(a);
  });
  e.onEmitted = (ops) => writes.markEmitted(ops);
  /**
   * Lowers one op into the program (or the function body being built); true when its code is in
   * the program now (fused element-wise ops are told through onEmitted when their group closes).
   */
  const lower = (op: Op): boolean => {
    if (SOURCE_KINDS.has(op.kind) || op.kind === 'assign' || ALIAS_OPS.has(op.kind)) {
      // an assign's value is finished: emit it, so that the state can be written early
      if (op.kind === 'assign') {
        fusion.closeFeeding(op);
        e.current = op;
      }
      if (ALIAS_OPS.has(op.kind)) e.alias(op.result, op.operands[0]!);
      else LOWERINGS[op.kind]!(op, e);
      return op.kind !== 'assign';
    }
    if (isElementwise(op)) {
      fusion.add(op);
      return false;
    }
    // a loop's body is lowered inside a C++ block of its own: nothing still open may be emitted there
    if (op.kind === 'for_loop') fusion.closeAll();
    else fusion.closeFeeding(op);
    // a multi-convolution is one call: every member's operands must exist
    if (op.annotations.multiConv) for (const m of multiConvGroupOf(op)) fusion.closeFeeding(m);
    e.current = op;
    const res = op.results.map((r) => `%${r.id}`).join(', ');
    e.comment(`${res}${res ? ' = ' : ''}${op.kind}(${op.operands.map((v) => `%${v.id}`).join(', ')})  ${mc.location(op)}`);
    LOWERINGS[op.kind]!(op, e);
    return true;
  };
  e.lowerBody = (ops, results, ipu) => {
    // the body's code stays inside its loop: nothing of it fuses with the code around it
    fusion.keep(results);
    e.closeComputeSet();
    const onEmitted = e.onEmitted;
    const outerIpu = e.bodyIpu;
    const outerOp = e.current;
    const outerPrefix = e.valuePrefix;
    e.onEmitted = undefined;
    e.bodyIpu = ipu;
    e.valuePrefix = `${e.local('loop')}_t`;
    try {
      for (const op of ops) {
        e.current = op;
        lower(op);
      }
      fusion.closeAll();
      e.closeComputeSet();
    } finally {
      e.onEmitted = onEmitted;
      e.bodyIpu = outerIpu;
      e.valuePrefix = outerPrefix;
      e.current = outerOp;
    }
  };
  const outlining = mc.opts.outline === false ? undefined : planOutlining(g, order);
  const functions = new Map<OutlineClass, OutlinedFunction>();
  let sincePause = 0;
  const multiConvs = multiConvGroups(g);
  const multiConvGroupOf = (op: Op) => multiConvs.get(op.annotations.multiConv!.group) ?? [op];
  const pending = orderMultiConvs(g, outlining?.order ?? order, (op) => outlining?.regionOf.get(op)?.ops);
  for (let i = 0; i < pending.length; i++) {
    const op = pending[i]!;
    if (++sincePause === 100) {
      sincePause = 0;
      yield;
    }
    const region = outlining?.regionOf.get(op);
    if (region) {
      // the region's ops come in one run: lower the function once, then call it
      fusion.closeAll();
      let fn = functions.get(region.cls);
      const first = !fn;
      if (!fn) {
        // a result the caller reads is finished at once (an open fused group would keep what it
        // reads live to the end of the region, as an assign outside would not)
        const outputs = new Set(region.outputs);
        const lowerOp = (x: Op) => {
          e.current = x;
          lower(x);
          for (const r of x.results) if (outputs.has(r)) fusion.closeProducing(r);
        };
        fn = lowerFunction(e, region, mc.ids.get(`layer_${mc.functionBodies.length}`, 'function'), outlineMode(region), lowerOp, () => fusion.closeAll());
        functions.set(region.cls, fn);
      }
      callFunction(e, region, fn, first);
      writes.markEmitted(region.ops);
      writes.flush();
      i += region.ops.length - 1;
      continue;
    }
    e.current = op;
    if (lower(op)) writes.markEmitted([op]);
    writes.flush();
  }
  fusion.closeAll();
  writes.flush();
  e.closeComputeSet();
  e.current = undefined;

  // graph outputs stream out, then the remaining assignments write state (reads above saw the old values)
  for (const o of g.outputs) {
    const info = mc.outputs.find((x) => x.name === o.name && x.kind === 'output')!;
    if (numElements(o.value.type.shape) === 0) continue;
    const r = e.ref(o.value);
    e.comment(`output ${o.name}`);
    // an overlapped output waits in its IO-tile buffer for the program's io_stream_out
    const to = mc.io.outputs.has(o.name) ? `d.ioOutputs.at(${info.index})` : `d.outFifo[${info.index}]`;
    e.emit(`prog.add(poplar::program::Copy(${e.tensor(o.value, r.ipu)}, ${to}));`);
  }
  e.current = undefined; // the epilogue: outputs and state writes
  const late: { a: Op; src: string; from: readonly Allocation[] }[] = [];
  for (const a of e.assigns) if (!writes.done.has(a)) writeState(a, (src, from) => late.push({ a, src, from }));
  for (const w of late) emitWrite(w.a, w.src, w.from);
  e.closeComputeSet();
  const code = [
    `// graph ${cppComment(g.name)}`,
    `poplar::program::Sequence ${fn}(Device &d) {`,
    '  poplar::program::Sequence prog;',
    ...e.lines,
    '  return prog;',
    '}',
  ].join('\n');
  return { code, prints: e.prints.map((p) => p.stream), emitter: e };
}

/** Largest all-reduce bucket: bounds the exchange buffers one collective needs. */
const ALL_REDUCE_BUCKET_BYTES = 64 * 2 ** 20;

/**
 * The variables of an all_reduce in buckets reduced by one collective each: same replica group and
 * element type (so they concatenate), in program order, each at most ALL_REDUCE_BUCKET_BYTES
 * (a larger variable is a bucket of its own). Empty variables and single-replica groups need none.
 */
function allReduceBuckets(mc: ModuleContext, variables: readonly string[]): { group: string; names: string[]; indices: number[] }[] {
  const open = new Map<string, { group: string; names: string[]; indices: number[]; bytes: number }>();
  const done: { group: string; names: string[]; indices: number[] }[] = [];
  for (const name of variables) {
    const s = mc.stateIndex(name);
    const group = commGroupLiteral(mc.module.variables.get(name)!.group, mc.module.replicationFactor);
    if (!group || numElements(s.shape) === 0) continue;
    const bytes = numElements(s.shape) * deviceType(s.dtype).bytes;
    const key = `${group}|${s.dtype}`;
    let b = open.get(key);
    if (b && b.bytes + bytes > ALL_REDUCE_BUCKET_BYTES) {
      done.push(b);
      b = undefined;
    }
    if (!b) {
      b = { group, names: [], indices: [], bytes: 0 };
      open.set(key, b);
    }
    b.names.push(name);
    b.indices.push(s.index);
    b.bytes += bytes;
  }
  return [...done, ...open.values()].map(({ group, names, indices }) => ({ group, names, indices }));
}

function commGroupLiteral(g: CommGroup | undefined, replicas: number): string | undefined {
  const { size } = groupStrideAndSize(g, replicas);
  if (size <= 1) return undefined;
  if (!g || g.type === 'all' || (g.type === 'consecutive' && size === replicas)) return 'gcl::CommGroup(gcl::CommGroupType::ALL, 0)';
  return `gcl::CommGroup(gcl::CommGroupType::${g.type === 'consecutive' ? 'CONSECUTIVE' : 'ORTHOGONAL'}, ${size})`;
}

/**
 * A replicated-tensor-sharding collective for one pair of variables, within the whole variable's
 * replica group: reduce-scatter (ADD/MEAN), the local scatter of PopART (LOCAL: each replica
 * keeps its own part), or all-gather cut back to the whole shape.
 */
function emitShardCopy(mc: ModuleContext, kind: 'reduce_scatter' | 'shard' | 'all_gather', op: 'sum' | 'mean' | undefined, pair: ShardPair, target: string, emit: (line: string) => void): void {
  const from = mc.stateIndex(pair.from);
  const to = mc.stateIndex(pair.to);
  const whole = kind === 'all_gather' ? to : from;
  const group = commGroupLiteral(mc.module.variables.get(whole.name)!.group, mc.module.replicationFactor);
  if (!group) {
    // a group of one replica: the shard is the whole tensor, flattened
    const src = kind === 'all_gather' ? `d.state[${from.index}].reshape(${shapeLiteral(to.shape)})` : `d.state[${from.index}].flatten()`;
    emit(`${target}.add(poplar::program::Copy(${src}, d.state[${to.index}]));`);
    return;
  }
  const label = cppStringLiteral(`${kind} ${pair.from}`, 64);
  const g = `d.ipu[${whole.ipu}]`;
  emit('{');
  if (kind === 'all_gather') {
    emit(`  poplar::Tensor gathered = gcl::allGatherCrossReplica(${g}, d.state[${from.index}], ${target}, ${group}, ${label}, poplar::OptionFlags());`);
    emit(`  ${target}.add(poplar::program::Copy(gathered.flatten().slice(0, ${numElements(to.shape)}, 0).reshape(${shapeLiteral(to.shape)}), d.state[${to.index}]));`);
  } else {
    const collective = kind === 'shard' ? 'LOCAL' : op === 'mean' ? 'MEAN' : 'ADD';
    emit(`  poplar::Tensor part = gcl::reduceScatterCrossReplica(${g}, d.state[${from.index}].flatten(), gcl::CollectiveOperator::${collective}, ${target}, ${group}, ${label}, poplar::OptionFlags());`);
    emit(`  ${target}.add(poplar::program::Copy(part, d.state[${to.index}]));`);
  }
  emit('}');
}

/** The vertex that advances a ring buffer's counter modulo its depth. */
function ringVertex(mc: ModuleContext): string {
  const cls = mc.codelets.add('RingAdvance', '', fixedVertex('RingAdvance'));
  return mc.codelets.vertexName(cls);
}

/** The program tree as nested poplar::program objects. */
function generateProgram(mc: ModuleContext, graphFns: Map<string, string>): string {
  const lines: string[] = [];
  let n = 0;
  const emit = (depth: number, l: string) => lines.push(`${'  '.repeat(depth)}${l}`);
  // compute sets adding a constant (modulo 2^32) to the random counter, made on first use
  const shifts = new Map<number, string>();
  const shiftDecls: string[] = [];
  const stepShift = (by: number): string => {
    const u = by >>> 0;
    const known = shifts.get(u);
    if (known) return known;
    const cls = mc.codelets.add('StepAdd', '', fixedVertex('StepAdd'));
    const cs = `stepAdd${shifts.size}`;
    shiftDecls.push(
      `  poplar::ComputeSet ${cs} = d.graph.addComputeSet("step_add_${shifts.size}");`,
      `  poplar::VertexRef ${cs}Vertex = d.ipu[0].addVertex(${cs}, "${mc.codelets.vertexName(cls)}", {{"step", d.step}});`,
      `  d.ipu[0].setInitialValue(${cs}Vertex["by"], ${u}u);`,
      `  d.ipu[0].setTileMapping(${cs}Vertex, 0);`,
    );
    shifts.set(u, cs);
    return cs;
  };
  const visit = (p: ProgramNode, target: string, depth: number): void => {
    switch (p.kind) {
      case 'sequence':
        for (const b of p.body) visit(b, target, depth);
        return;
      case 'repeat': {
        const s = `p${n++}`;
        emit(depth, '{');
        emit(depth + 1, `poplar::program::Sequence ${s};`);
        visit(p.body, s, depth + 1);
        emit(depth + 1, `${target}.add(poplar::program::Repeat(${p.count}, ${s}));`);
        emit(depth, '}');
        return;
      }
      case 'execute': {
        const random = mc.usesRandom && drawsRandom(mc.module.graphs.get(p.graph)!);
        // a graph drawing for another micro-batch than the counter's: the counter shifted around it
        const off = random ? (p.randomOffset ?? 0) : 0;
        if (off !== 0) emit(depth, `${target}.add(poplar::program::Execute(${stepShift(off)}));`);
        emit(depth, `${target}.add(${graphFns.get(p.graph)!});`);
        if (off !== 0) emit(depth, `${target}.add(poplar::program::Execute(${stepShift(-off)}));`);
        if (random && p.randomOffset === undefined) emit(depth, `${target}.add(poplar::program::Execute(stepCs));`);
        return;
      }
      case 'advance_random':
        if (mc.usesRandom && p.by !== 0) emit(depth, `${target}.add(poplar::program::Execute(${stepShift(p.by)}));`);
        return;
      case 'stream_in':
        for (const name of p.inputs) {
          const s = mc.inputs.find((i) => i.name === name)!;
          if (numElements(s.shape) === 0) continue;
          emit(depth, `${target}.add(poplar::program::Copy(d.inFifo[${s.index}], d.inputs[${s.index}]));  // ${cppComment(name, 60)}`);
        }
        return;
      case 'io_stream_in':
      case 'io_copy_in':
      case 'io_stream_out':
        for (const l of ioTransfer(mc, p, target)) emit(depth, l);
        return;
      case 'all_reduce': {
        // one collective per bucket of variables with the same replica group and type, as
        // PopART merges them: fewer, larger transfers than one all-reduce per gradient
        const op = p.op === 'mean' ? 'MEAN' : 'ADD';
        for (const bucket of allReduceBuckets(mc, p.variables)) {
          const label = bucket.names.length === 1 ? `all_reduce ${bucket.names[0]}` : `all_reduce ${bucket.names.length} tensors`;
          const call = (data: string, at: number) =>
            emit(at, `gcl::allReduceInPlaceCrossReplica(d.graph, ${data}, gcl::CollectiveOperator::${op}, ${target}, ${bucket.group}, ${cppStringLiteral(label, 64)}, poplar::OptionFlags());`);
          if (bucket.indices.length === 1) {
            call(`d.state[${bucket.indices[0]}]`, depth);
            continue;
          }
          emit(depth, `{  // ${cppComment(bucket.names.join(', '), 100)}`);
          emit(depth + 1, `poplar::Tensor bucket = poplar::concat({${bucket.indices.map((i) => `d.state[${i}].flatten()`).join(', ')}});`);
          call('bucket', depth + 1);
          emit(depth, '}');
        }
        return;
      }
      case 'remote_load':
      case 'remote_store':
        for (const name of p.variables) {
          const s = mc.stateIndex(name);
          const [src, dst] = p.kind === 'remote_load' ? [`d.remote.at(${s.index})`, `d.state[${s.index}]`] : [`d.state[${s.index}]`, `d.remote.at(${s.index})`];
          const what = `${p.kind === 'remote_load' ? 'load' : 'store'} ${cppComment(name, 60)}`;
          if (!stagesThroughIo(mc, name, p.kind === 'remote_load' ? 'load' : 'store')) {
            emit(depth, `${target}.add(poplar::program::Copy(${src}, ${dst}));  // ${what}`);
            continue;
          }
          // through the IO tiles (useIOTilesToLoad / useIOTilesToStore)
          emit(depth, `${target}.add(poplar::program::Copy(${src}, d.ioRemote.at(${s.index})));  // ${what}, to the IO tiles`);
          emit(depth, `${target}.add(poplar::program::Copy(d.ioRemote.at(${s.index}), ${dst}));`);
        }
        return;
      case 'reduce_scatter':
      case 'shard':
      case 'all_gather':
        for (const pair of p.pairs) emitShardCopy(mc, p.kind, p.kind === 'reduce_scatter' ? p.op : undefined, pair, target, (l) => emit(depth, l));
        return;
      case 'copy':
        for (const { from, to } of p.pairs) {
          const a = mc.stateIndex(from);
          const b = mc.stateIndex(to);
          if (numElements(a.shape) === 0) continue;
          emit(depth, `${target}.add(poplar::program::Copy(d.state[${a.index}], d.state[${b.index}]));  // ${cppComment(`${from} -> ${to}`, 60)}`);
        }
        return;
      case 'stash':
      case 'restore':
        for (const { from, to } of p.pairs) {
          const ring = mc.stateIndex(p.kind === 'stash' ? to : from);
          const item = mc.stateIndex(p.kind === 'stash' ? from : to);
          const counters = ringCounters(ring.name);
          const counter = mc.stateIndex(p.kind === 'stash' ? counters.head : counters.tail);
          const g = `d.ipu[${ring.ipu}]`;
          const label = cppStringLiteral(`${p.kind} ${ring.name}`, 64);
          if (numElements(item.shape) > 0) {
            if (p.kind === 'stash') {
              emit(depth, `popops::dynamicUpdate(${g}, d.state[${ring.index}], d.state[${item.index}].expand({0}), d.state[${counter.index}].reshape({1}), {0}, {1}, ${target}, ${label});`);
            } else {
              emit(depth, `${target}.add(poplar::program::Copy(popops::dynamicSlice(${g}, d.state[${ring.index}], d.state[${counter.index}].reshape({1}), {0}, {1}, ${target}, ${label}).squeeze({0}), d.state[${item.index}]));`);
            }
          }
          emit(depth, `advanceRing(${g}, d.state[${counter.index}], ${ring.shape[0]}, "${ringVertex(mc)}", ${target});`);
        }
        return;
    }
  };
  lines.push('poplar::program::Sequence buildProgram(Device &d) {');
  for (const [name, fn] of graphFns) lines.push(`  poplar::program::Sequence ${fn} = ${fn}Build(d);  // ${cppComment(name, 60)}`);
  if (mc.usesRandom) {
    const cls = mc.codelets.add('StepIncrement', '', fixedVertex('StepIncrement'));
    const vertex = mc.codelets.vertexName(cls);
    lines.push(
      '  // counts graph executions: the stream of the random generators, as in the reference',
      '  poplar::ComputeSet stepCs = d.graph.addComputeSet("step_increment");',
      `  poplar::VertexRef stepVertex = d.ipu[0].addVertex(stepCs, "${vertex}", {{"step", d.step}});`,
      '  d.ipu[0].setTileMapping(stepVertex, 0);',
    );
  }
  const mainAt = lines.length;
  lines.push('  poplar::program::Sequence main;');
  visit(mc.module.program, 'main', 1);
  lines.splice(mainAt, 0, ...shiftDecls);
  lines.push('  return main;', '}');
  return lines.join('\n');
}

/**
 * Generates the Poplar C++ for a Module: codelets.cpp (vertices), host.cpp (graph, programs,
 * engine and the runtime protocol) and plan.json (stream and state layout). Throws a
 * DiagnosticError for ops without a lowering, non-device dtypes, and models that cannot fit in
 * tile memory (naming the op and its source location).
 */
export function generatePoplar(module: Module, opts: GenerateOptions = {}): GeneratedSources {
  return runToEnd(generatePoplarSteps(module, opts));
}

/** generatePoplar, pausing between its stages (every 100 ops of a graph, the memory plan, the sources). */
export function* generatePoplarSteps(module: Module, opts: GenerateOptions = {}): Pausable<GeneratedSources> {
  checkSupported(module);
  const io = overlappedStreams(module.program);
  const ioProblems = ioTileProblems(opts.ioTiles ?? 0, opts.tilesPerIpu ?? GC200.tilesPerIpu, io.inputs.size + io.outputs.size > 0);
  if (ioProblems.length) throw new DiagnosticError(ioProblems);
  const ipus = Math.max(1, maxIpu(module));
  const mc = new ModuleContext(module, opts, ipus);
  const numerics: HostNumerics = { stochasticRounding: !!opts.stochasticRounding, floatingPointExceptions: !!opts.floatingPointExceptions };
  // stochastic rounding is seeded from the run seed, which the host writes for random modules
  if (numerics.stochasticRounding) mc.usesRandom = true;
  declareModule(mc);
  const R = module.replicationFactor;

  const graphFns = new Map<string, string>();
  const graphCode: string[] = [];
  const prints: Record<string, number[]> = {};
  const emitters = new Map<string, GraphEmitter>();
  for (const [name, g] of module.graphs) {
    const fn = mc.ids.get(`graph_${name}`, 'graph');
    graphFns.set(name, fn);
    const r = yield* generateGraph(mc, g, `${fn}Build`);
    graphCode.push(r.code);
    prints[name] = r.prints;
    emitters.set(name, r.emitter);
    yield;
  }
  const memory = planMemory(mc, emitters);
  const memoryProblems = [...fitProblems(memory, mc), ...ioFitProblems(mc)];
  if (memoryProblems.length && !opts.allowOutOfMemory) throw new DiagnosticError(memoryProblems);
  yield;
  const program = generateProgram(mc, graphFns);
  const { tables, declare } = generateDeclare(mc);

  const streams = new Map<string, number>();
  const executes = new Map<string, number>();
  runsOf(module.program, 1, streams, executes);
  const bytesOf = (t: DType, shape: readonly number[]) => numElements(shape) * deviceType(t).bytes;
  const inputs = mc.inputs.map((s) => {
    const perRun = streams.get(s.name) ?? 0;
    return { ...s, perRun, bytes: perRun * R * bytesOf(s.dtype, s.shape) };
  });
  const outputs = mc.outputs.map((o) => {
    let perRun = 0;
    if (o.kind === 'print') perRun = executes.get(o.graph!) ?? 0;
    else for (const [name, g] of module.graphs) if (g.outputs.some((x) => x.name === o.name)) perRun += executes.get(name) ?? 0;
    return { ...o, perRun, bytes: perRun * R * bytesOf(o.dtype, o.shape) };
  });
  const state = mc.state.map((s) => ({ ...s, handle: `v${s.index}`, bytes: bytesOf(s.dtype, s.shape) }));

  const header = `// Generated by tilegraph from module ${cppComment(module.name, 80)}: do not edit.`;
  // what both translation units read: the module's constants and constant data
  const constants = [
    `constexpr unsigned kReplicas = ${R};`,
    `constexpr unsigned kIpus = ${ipus};`,
    ...(opts.ioTiles ? ['// tiles per IPU set aside for IO (numIOTiles): each IPU\'s last tiles', `constexpr unsigned kIoTiles = ${opts.ioTiles};`] : []),
    '// the device: IPU hardware, the IPU Model, or an offline target (compile only); IPUs requested',
    `constexpr unsigned kDeviceKind = ${({ ipu: 'kHardware', 'ipu-model': 'kIpuModel', offline: 'kOffline' } as const)[opts.device?.kind ?? 'ipu']};`,
    `constexpr unsigned kDeviceIpus = ${deviceIpus(ipus, R, opts.device)};`,
    `constexpr const char *kIpuArch = "${opts.device?.arch ?? 'ipu2'}";`,
    `constexpr int kIpuId = ${opts.device?.ipuId ?? -1};`,
    `constexpr const char *kSyncConfiguration = "${({ full: '', single_pipeline: 'ipuAndAll', replica_and_ladder: 'intraReplicaAndLadder' } as const)[opts.device?.syncPattern ?? 'full']}";`,
  ];
  // Outlined bodies, and the largest graph's builder when it is large, go to translation units of
  // their own, which build beside host.cpp.
  const layers = mc.functionBodies.length > 0 ? outlinedLayersUnit(header, constants, mc.fileScope, mc.functionBodies) : undefined;
  const largest = graphCode.reduce<number | undefined>((best, c, i) => (c.length >= GRAPH_UNIT_BYTES && (best === undefined || c.length > graphCode[best]!.length) ? i : best), undefined);
  const graph = largest !== undefined ? graphUnit(header, constants, mc.fileScope, `poplar::program::Sequence ${[...graphFns.values()][largest]!}Build(Device &d)`, graphCode[largest]!, layers) : undefined;
  const host = [
    header,
    HOST_INCLUDES,
    '',
    ...(layers ? [layers.prototypes, ''] : []),
    ...(graph ? [graph.prototypes, ''] : []),
    'namespace {',
    '',
    'using namespace tilegraph;',
    ...(layers ? ['using namespace tilegraph_layers;'] : []),
    ...(graph ? ['using namespace tilegraph_graphs;'] : []),
    '',
    ...constants,
    '// bytes per run (all replicas) of each stream (the state\'s sizes and storage are in kStateRows)',
    sizeTable('kInputBytes', inputs.map((s) => s.bytes)),
    sizeTable('kOutputBytes', outputs.map((s) => s.bytes)),
    ...(mc.hostFunctions.length ? [hostFunctionTable(mc)] : []),
    '',
    ...mc.fileScope.map((x) => `${x}\n`),
    tables,
    '',
    declare,
    '',
    ...graphCode.filter((_, i) => i !== largest).map((c) => `${c}\n`),
    program,
    '',
    '} // namespace',
    '',
    hostMain(numerics, { hostFunctions: mc.hostFunctions.length > 0, ioTiles: !!opts.ioTiles }),
    '',
  ].join('\n');
  yield;
  const codelets = mc.codelets.render(`// Generated by tilegraph from module ${cppComment(module.name, 80)}: do not edit.`, mc.usesRandom);
  const plan: BuildPlan = {
    version: 1,
    module: module.name,
    replicationFactor: R,
    ipus,
    files: ['codelets.cpp', 'host.cpp', ...(graph ? [GRAPH_FILE] : []), ...(layers ? [OUTLINED_FILE] : []), 'tilegraph_host.cpp'],
    vertices: mc.codelets.vertexNames(),
    inputs,
    outputs,
    state,
    random: mc.usesRandom,
    prints,
    hostFunctions: mc.hostFunctions,
    program: module.program,
    memory: memory.report,
  };
  return { files: { 'codelets.cpp': codelets, 'host.cpp': host, ...(graph ? { [GRAPH_FILE]: graph.text } : {}), ...(layers ? { [OUTLINED_FILE]: layers.text } : {}), ...HOST_SUPPORT_FILES, 'plan.json': `${JSON.stringify(plan, null, 2)}\n` }, plan, memoryProblems, allocations: mc.memory.buffers };
}
