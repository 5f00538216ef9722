import { DType, Graph, Module, Op, Tensor, TensorType, Value, formatLocation, numElements, overlappedStreams } from '@tilegraph/ir';
import { CodeletSet } from './codelets.js';
import { Allocation, AllocationKind, GC200, MemoryPlanner, chooseMappingOffset } from './memory.js';
import { PlannedLayout, PlannedOperand } from './layout.js';
import { IdentifierTable, cppComment, cppStringLiteral } from './sanitize.js';
import { deviceType, elementLiteral, linearMappingParams } from './types.js';

export type PartialsType = 'float' | 'half';

export interface GenerateOptions {
  /** poplin's availableMemoryProportion for matmuls and convolutions (default 0.6). */
  availableMemoryProportion?: number;
  /** Per-IPU proportions (Options.setAvailableMemoryProportion({IPU0: ...})). */
  availableMemoryProportionPerIpu?: Readonly<Record<number, number>>;
  /** Type of matmul/convolution partial sums (default float). */
  partialsType?: PartialsType | 'float32' | 'float16';
  /** Round float16 results stochastically, seeded by the run seed (Precision.enableStochasticRounding). */
  stochasticRounding?: boolean;
  /** Stop on floating-point exceptions: invalid operation, division by zero, overflow (Precision.enableFloatingPointExceptions). */
  floatingPointExceptions?: boolean;
  /** Target geometry for the memory estimate (default: GC200). */
  tilesPerIpu?: number;
  /**
   * Tiles per IPU set aside for IO (TensorLocations.numIOTiles; default 0): computation is mapped
   * on the other tiles only; overlapped streams land on these.
   */
  ioTiles?: number;
  bytesPerTile?: number;
  /** Source-location excludes for diagnostics (PopTorch's sourceLocationExcludes). */
  sourceLocationExcludes?: readonly string[];
  /**
   * How tensors are laid out over the tiles: `planned` (default) creates matmul and convolution
   * operands with PopLibs' creation functions and element-wise results like their inputs;
   * `linear` spreads every tensor linearly from the next free tile (to compare against).
   */
  tileLayout?: 'planned' | 'linear';
  /**
   * Put independent generated-vertex work (fused element-wise groups, pools, random, argmax, ...)
   * that follows one another in a graph's program into one compute set, one exchange and sync
   * instead of one each (default true; false: a compute set per lowered op, to compare against).
   */
  mergeComputeSets?: boolean;
  /**
   * Lower repeated regions of a graph (layers with the same structure) once, as a
   * poplar::Function each occurrence calls (default true; PopART's enableOutlining).
   */
  outline?: boolean;
  /** Largest number of element-wise ops fused into one vertex (default 32). */
  maxFusedOps?: number;
  /** Plan memory without failing when a tile is over its bytes (for reports; Poplar's debug.allowOutOfMemory). */
  allowOutOfMemory?: boolean;
  /** The device the host program attaches to (default: IPU hardware, Mk2). */
  device?: DeviceChoice;
}

/** Which device the generated host program uses: the PopTorch options useIpuModel, useOfflineIpuTarget, useIpuId, autoRoundNumIPUs. */
export interface DeviceChoice {
  /** IPU hardware, the IPU Model, or an offline target (compile only, connectionType Never). */
  readonly kind: 'ipu' | 'ipu-model' | 'offline';
  /** The IPU architecture: ipu1 (Mk1), ipu2 (Mk2 GC200), ipu21 (Bow). Default ipu2. */
  readonly arch?: 'ipu1' | 'ipu2' | 'ipu21';
  /** Request IPUs × replicas rounded up to a power of two (devices come in powers of two). */
  readonly autoRoundNumIpus?: boolean;
  /** A hardware device by its id (gc-info). */
  readonly ipuId?: number;
  /**
   * How the IPUs synchronise (PopART's SyncPattern): the device is requested with Poplar's
   * `syncConfiguration` option for single_pipeline (ipuAndAll) and replica_and_ladder
   * (intraReplicaAndLadder); full (the default) needs none.
   */
  readonly syncPattern?: 'full' | 'single_pipeline' | 'replica_and_ladder';
}

/** IPUs to request: IPUs × replicas, rounded up to a power of two when asked. */
export function deviceIpus(ipus: number, replicas: number, device: DeviceChoice | undefined): number {
  const n = ipus * replicas;
  return device?.autoRoundNumIpus ? 2 ** Math.ceil(Math.log2(n)) : n;
}

/** A value's tensor in the generated host program. */
export interface ValueRef {
  /** The C++ expression (a local variable) naming the tensor, once it exists. */
  expr?: string;
  /** Emits the tensor when it is first needed (constants). */
  materialize?: () => string;
  /** IPU whose virtual graph holds the tensor. */
  ipu: number;
  /** State variables this tensor is a view of (for the end-of-graph assignments). */
  roots: ReadonlySet<string>;
  /** The value, when it is a constant. */
  constant?: Tensor;
  /** The device memory the tensor reads (its own, or its base tensors' for a view). */
  buffers?: readonly Allocation[];
  /** The tensor is its one buffer whole, in the buffer's element order (not a view of part of it). */
  whole?: boolean;
}

export interface StateInfo {
  readonly name: string;
  readonly index: number;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly role: string;
  readonly ipu: number;
  /**
   * Where the value lives between runs: its on-chip tensor (with host handles), a remote buffer
   * (host access through the buffer, the tensor live only around its uses), or nowhere (a
   * transient working copy, without host access).
   */
  readonly storage: 'on_chip' | 'off_chip' | 'transient';
  /** Replicated tensor sharding: the whole tensor's shape, the number of parts, and each replica's part. */
  readonly shard?: { readonly whole: readonly number[]; readonly parts: number; readonly rank: readonly number[] };
}

export interface StreamInfo {
  readonly name: string;
  readonly index: number;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly ipu: number;
}

export interface OutputInfo {
  readonly name: string;
  readonly index: number;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly kind: 'output' | 'print';
  /** For prints: graph and position of the print op among the graph's prints. */
  readonly graph?: string;
  readonly title?: string;
}

/** A CPU op's host function: the registered name, its Poplar handle, and its buffers. */
export interface HostFunctionInfo {
  readonly name: string;
  readonly handle: string;
  readonly inputs: readonly TensorType[];
  readonly outputs: readonly TensorType[];
  /** Where the op is in the model, for messages. */
  readonly location: string;
}

/** Module-wide state of one generation: streams, state, codelets, memory. */
export class ModuleContext {
  readonly codelets = new CodeletSet();
  readonly memory: MemoryPlanner;
  /** Memory of the module's state and input tensors, by name. */
  readonly stateBuffers = new Map<string, Allocation>();
  readonly inputBuffers = new Map<string, Allocation>();
  /** States (`st:name`) and inputs (`in:name`) made in the layout of the matmul or convolution that first reads them. */
  planned = new Map<string, PlannedOperand>();
  /** Their buffers, with the layout each is in. */
  readonly plannedBuffers = new Map<Allocation, PlannedLayout>();
  /** The module trains: some graph holds backward ops (autograd's `grad` name scopes). */
  get hasBackwardPass(): boolean {
    this.backward ??= [...this.module.graphs.values()].some((g) => g.ops.some((op) => /(^|\/)grad(\/|$)/.test(op.scope)));
    return this.backward;
  }
  private backward?: boolean;
  /** File-scope identifiers (graph functions, constant arrays). */
  readonly ids = new IdentifierTable(['d', 'g', 'prog', 'main']);
  readonly state: StateInfo[] = [];
  readonly inputs: StreamInfo[] = [];
  readonly outputs: OutputInfo[] = [];
  readonly hostFunctions: HostFunctionInfo[] = [];
  /** File-scope declarations (constant arrays). */
  readonly fileScope: string[] = [];
  usesRandom = false;
  /** The C++ functions building the outlined functions (file scope, before the graphs). */
  readonly functionBodies: { readonly signature: string; readonly text: string }[] = [];
  readonly headerFeatures = new Set<string>();

  constructor(
    readonly module: Module,
    readonly opts: GenerateOptions,
    readonly ipus: number,
  ) {
    // computation is mapped on the compute tiles only (the IO tiles follow them on each IPU)
    this.memory = new MemoryPlanner(ipus, (opts.tilesPerIpu ?? GC200.tilesPerIpu) - (opts.ioTiles ?? 0), opts.bytesPerTile, opts.ioTiles ?? 0);
    this.io = overlappedStreams(module.program);
  }

  /** The inputs and outputs streamed through IO tiles (the program's io_* nodes). */
  readonly io: { readonly inputs: ReadonlySet<string>; readonly outputs: ReadonlySet<string> };

  stateIndex(name: string): StateInfo {
    const s = this.state.find((x) => x.name === name);
    if (!s) throw new Error(`internal: unknown state ${name}`);
    return s;
  }

  location(op: Op): string {
    return formatLocation(op.loc, this.opts.sourceLocationExcludes ?? []);
  }

  availableMemoryProportion(ipu: number): number {
    return this.opts.availableMemoryProportionPerIpu?.[ipu] ?? this.opts.availableMemoryProportion ?? 0.6;
  }

  partialsType(): PartialsType {
    const p = this.opts.partialsType ?? 'float';
    return p === 'float16' || p === 'half' ? 'half' : 'float';
  }
}

/** A shape as a C++ initializer list: {4, 8}. */
export function shapeLiteral(shape: readonly number[]): string {
  return `{${shape.join(', ')}}`;
}

/**
 * Bytes of state writes a merged compute set may hold back (their new values stay live until
 * the compute set has run): PopART's mergeVarUpdateMemThreshold default.
 */
export const MERGE_DEFERRED_BYTES = 1_000_000;

/** One compute set of an open region, and the program lines held back to run right after it. */
interface Level {
  readonly name: string;
  /** Buffers its vertices read and write. */
  readonly reads: Set<Allocation>;
  readonly writes: Set<Allocation>;
  /** Program lines (state writes) that run after its Execute, with what they read and write. */
  readonly deferred: string[];
  readonly deferredReads: Set<Allocation>;
  readonly deferredWrites: Set<Allocation>;
  /** Everything its members and held-back lines touch; the buffers its vertices make (outputs). */
  readonly touched: Set<Allocation>;
  readonly made: Set<Allocation>;
  /** Its first member (blamed for its step in the memory plan). */
  readonly op: Op | undefined;
}

/**
 * Vertex work and state writes since the last program step, not yet in the program: compute sets
 * in the order they run (each after the ones its vertices depend on), each followed by the state
 * writes that have to wait for it.
 */
interface OpenRegion {
  readonly levels: Level[];
  deferredBytes: number;
  /** Where its steps go in the graph's lines: after the code of its last member or held-back line. */
  insertAt: number;
}

const meets = (a: Iterable<Allocation>, b: ReadonlySet<Allocation>) => {
  for (const x of a) if (b.has(x)) return true;
  return false;
};

/** A program line: it adds to (or passes) the graph's program sequence `prog`; string literals and comments aside. */
function isProgramLine(line: string): boolean {
  if (line.trimStart().startsWith('//')) return false;
  return /\bprog\b/.test(line.replace(/"(?:[^"\\]|\\.)*"/g, '""'));
}

/** The ops whose result is their operand (no code). */
export const ALIAS_OPS = new Set(['identity', 'nop', 'recomputation_checkpoint', 'set_available_memory', 'set_overlap_for_input', 'set_overlap_for_output']);

/**
 * Emits the function that builds one graph of the module: its tensors, compute sets and the
 * program sequence `prog` that runs it.
 */
export class GraphEmitter {
  readonly lines: string[] = [];
  private readonly refs = new Map<Value, ValueRef>();
  private readonly copies = new Map<string, string>();
  private readonly aliasOf = new Map<Value, Value>();
  private tmp = 0;
  private cs = 0;
  /** Vertex work and state writes not yet in the program (see computeSet). */
  private region: OpenRegion | undefined;
  /** A compute set computeSet() handed out whose execute() has not come yet. */
  private unexecuted: string | undefined;
  /** Buffers touched since the current tick began. */
  private tickTouched = new Set<Allocation>();
  private currentOp: Op | undefined;
  /**
   * The graph's clock: one tick per lowered op (or fused group), so that everything one op reads
   * and writes is live at the same time. `opAt[t]` is the op lowered at tick t.
   */
  now = 0;
  readonly opAt: (Op | undefined)[] = [undefined];
  /** First and last tick each buffer is used in this graph. */
  readonly touches = new Map<Allocation, [number, number]>();
  /** Buffers counted for a PopLibs call's result, waiting for `define`. */
  private pending: Allocation[] = [];
  private copyBuffers = new Map<string, Allocation>();
  /** The tile span of the last result made, which vertex-mapped outputs follow. */
  private lastResult: Allocation | undefined;
  /** Buffers of the tensors this emitter declared, by C++ name. */
  private readonly named = new Map<string, Allocation>();
  /** assign ops, applied when the graph finishes. */
  readonly assigns: Op[] = [];
  /** The result vector and position of each outlined call's result expression (`r452[2]`). */
  readonly callResults = new Map<string, readonly [vector: string, index: number]>();
  /** Per-graph memo for lowerings (e.g. seed copies on other IPUs). */
  readonly cache = new Map<string, unknown>();
  /** Told when ops have been emitted into the program (fused element-wise ops are emitted late). */
  onEmitted: ((ops: readonly Op[]) => void) | undefined;
  /**
   * For v = x * x that a sum or mean reduces as SQUARE_ADD of x, that x (the fusion of element-wise
   * ops, which knows the values read later, then does not write v); see lower/square-sums.ts.
   */
  squaredOperand: (v: Value) => Value | undefined = () => undefined;
  /** Print ops of this graph in order, with their output stream index. */
  readonly prints: { op: Op; stream: number }[] = [];

  constructor(
    readonly mc: ModuleContext,
    readonly graph: Graph,
  ) {}

  /** The op being lowered (blamed for allocations); setting it starts a new tick. */
  get current(): Op | undefined {
    return this.currentOp;
  }

  set current(op: Op | undefined) {
    this.currentOp = op;
    this.now++;
    this.opAt.push(op);
    this.pending = [];
    this.tickTouched = new Set();
  }

  /** The memory of a tensor this emitter declared under C++ name `name`. */
  bufferNamed(name: string): Allocation | undefined {
    return this.named.get(name);
  }

  /** Records a use of buffers at the current tick. */
  touch(bs: readonly Allocation[] | undefined): void {
    if (!bs) return;
    for (const b of bs) {
      this.tickTouched.add(b);
      const r = this.touches.get(b);
      if (r) r[1] = this.now;
      else this.touches.set(b, [this.now, this.now]);
    }
  }

  /** Whether program lines would be held back now (see emitAfterComputeSet). */
  get holdsLines(): boolean {
    return this.region !== undefined;
  }

  emit(line: string): void {
    if (this.region && isProgramLine(line)) {
      if (this.unexecuted !== undefined) throw new Error(`internal: a program step between compute set ${this.unexecuted} and its Execute`);
      this.closeComputeSet();
    }
    this.lines.push(`  ${line}`);
  }

  comment(text: string): void {
    this.emit(`// ${cppComment(text)}`);
  }

  /** `d.ipu[k]`: the virtual graph of IPU k. */
  g(ipu: number): string {
    return `d.ipu[${ipu}]`;
  }

  ipuOf(op: Op): number {
    return this.bodyIpu ?? op.annotations.ipu ?? 0;
  }

  /** Starts the C++ names of values; each loop body has its own, since a body's value ids restart. */
  valuePrefix = 't';

  /** The C++ name of a value's tensor. */
  valueName(v: Value): string {
    return `${this.valuePrefix}${v.id}`;
  }

  /** The IPU of the loop body being lowered: a body runs on its loop's IPU, whatever its ops say. */
  bodyIpu: number | undefined;

  /** Lowers a loop body's ops (not its inputs) into `prog` on IPU `ipu`, finishing `results`; the generator sets it. */
  lowerBody: (ops: readonly Op[], results: readonly Value[], ipu: number) => void = () => {
    throw new Error('internal: no loop body lowering is set');
  };

  /** A fresh local name. */
  local(prefix = 'u'): string {
    return `${prefix}${this.tmp++}`;
  }

  /** The value `v` stands for once alias ops are looked through. */
  resolve(v: Value): Value {
    let x = v;
    for (let a = this.aliasOf.get(x); a; a = this.aliasOf.get(x)) x = a;
    return x;
  }

  alias(result: Value, operand: Value): void {
    this.aliasOf.set(result, this.resolve(operand));
  }

  hasRef(v: Value): boolean {
    return this.refs.has(this.resolve(v));
  }

  ref(v: Value): ValueRef {
    const r = this.refs.get(this.resolve(v));
    if (!r) throw new Error(`internal: value %${v.id} (${v.producer.kind}) has no tensor`);
    this.touch(r.buffers);
    return r;
  }

  setRef(v: Value, r: ValueRef): void {
    this.refs.set(v, r);
  }

  /**
   * Lets `v` (and every value standing for the same tensor) read `r` until the returned function
   * puts the old tensor back: an outlined function's body reads its parameter tensors.
   */
  substitute(v: Value, r: ValueRef): () => void {
    const root = this.resolve(v);
    const had = this.refs.get(root);
    this.refs.set(root, r);
    return () => {
      if (had) this.refs.set(root, had);
      else this.refs.delete(root);
    };
  }

  /** Makes `r` the tensor of `v` (an outlined builder's result), touching its memory now. */
  rebind(v: Value, r: ValueRef): void {
    this.aliasOf.delete(v);
    this.refs.set(v, r);
    this.touch(r.buffers);
  }

  /** Gives `v` a tensor made by `expr` with memory of its own: an outlined function's result, copied out. */
  adopt(v: Value, expr: string, ipu: number): void {
    this.aliasOf.delete(v);
    const b = this.allocate('activation', v.type.dtype, v.type.shape, ipu, this.valueLabel(v));
    this.refs.set(v, { expr, ipu, roots: new Set(), buffers: [b], whole: false });
  }

  /**
   * Declares `poplar::Tensor tN = expr;` for a result and records it. The result owns the memory
   * a PopLibs call just counted (countResult), or else it is a view of the op's operands.
   */
  define(v: Value, expr: string, ipu: number, roots: ReadonlySet<string> = new Set(), whole = false): string {
    const name = this.valueName(v);
    this.emit(`poplar::Tensor ${name} = ${expr};`);
    const own = this.pending.pop();
    const buffers = own ? [own] : [...new Set((this.current?.operands ?? []).flatMap((x) => (this.hasRef(x) ? (this.refs.get(this.resolve(x))!.buffers ?? []) : [])))];
    this.refs.set(v, { expr: name, ipu, roots, buffers, whole: whole && !!own });
    this.touch(buffers);
    return name;
  }

  /**
   * Declares `poplar::Tensor name = expr;` for a PopLibs result that is no IR value; it owns the
   * memory countResult just counted.
   */
  defineOwned(name: string, expr: string, ipu: number): ValueRef {
    this.emit(`poplar::Tensor ${name} = ${expr};`);
    const own = this.pending.pop();
    if (!own) throw new Error('internal: defineOwned without a counted result');
    this.touch([own]);
    this.named.set(name, own);
    return { expr: name, ipu, roots: new Set(), buffers: [own], whole: true };
  }

  /** `v` lies on `ipu` in the layout `layout` plans for (made by its PopLibs creation function), or is a view of such a tensor. */
  inPlannedLayout(v: Value, layout: PlannedLayout, ipu: number): boolean {
    const r = this.ref(v);
    const b = r.buffers?.length === 1 ? r.buffers[0] : undefined;
    return !!b && this.mc.plannedBuffers.get(b) === layout && r.ipu === ipu;
  }

  /** A debug-name string literal for a value or op. */
  debugName(what: string): string {
    return cppStringLiteral(what, 64);
  }

  valueLabel(v: Value): string {
    return v.name ? `${v.producer.kind}:${v.name}` : `${v.producer.kind}%${v.id}`;
  }

  /**
   * The tensor of `v` on IPU `ipu`: the value's own tensor, or a copy on that IPU (an inter-IPU
   * copy, made once per value and IPU).
   */
  tensor(v: Value, ipu: number): string {
    const r = this.ref(v);
    if (r.expr === undefined) {
      // constants are made where they are first needed
      r.ipu = ipu;
      r.expr = r.materialize!();
    }
    if (r.ipu === ipu) return r.expr;
    const key = `${this.resolve(v).id}@${ipu}`;
    const known = this.copies.get(key);
    if (known) {
      this.touch([this.copyBuffers.get(key)!]);
      return known;
    }
    const name = this.newTensor(v.type.dtype, v.type.shape, ipu, `${this.valueLabel(v)}@ipu${ipu}`);
    this.emit(`prog.add(poplar::program::Copy(${r.expr}, ${name}));`);
    this.copies.set(key, name);
    this.copyBuffers.set(key, this.lastResult!);
    return name;
  }

  /** Operand `i` of `op` on the op's IPU. */
  operand(op: Op, i: number): string {
    return this.tensor(op.operands[i]!, this.ipuOf(op));
  }

  /** Counts a new tensor's memory, spread linearly from the IPU's next free tile, used from now on. */
  private allocate(kind: AllocationKind, dtype: DType, shape: readonly number[], ipu: number, label: string, offset?: number): Allocation {
    const dt = deviceType(dtype);
    const { grain, minElements } = linearMappingParams(dtype);
    const b = this.mc.memory.addLinear(kind, ipu, numElements(shape), dt.bytes, grain, minElements, this.current, label, offset);
    if (kind !== 'constant') this.touch([b]);
    return b;
  }

  /** A new tensor spread linearly over the tiles of an IPU; counts its memory. */
  newTensor(dtype: DType, shape: readonly number[], ipu: number, label: string, name = this.local(), kind: AllocationKind = 'temporary'): string {
    const dt = deviceType(dtype);
    const { grain, minElements } = linearMappingParams(dtype);
    const b = this.allocate(kind, dtype, shape, ipu, label);
    this.lastResult = b;
    this.named.set(name, b);
    this.emit(`poplar::Tensor ${name} = newTensor(${this.g(ipu)}, ${dt.poplar}, ${shapeLiteral(shape)}, ${grain}, ${minElements}, ${b.span.offset}, ${this.debugName(label)});`);
    return name;
  }

  /** A new tensor for result `v` of the current op. */
  newResult(v: Value, ipu: number): string {
    const name = this.newTensor(v.type.dtype, v.type.shape, ipu, this.valueLabel(v), this.valueName(v), 'activation');
    this.refs.set(v, { expr: name, ipu, roots: new Set(), buffers: [this.lastResult!], whole: true });
    return name;
  }

  /**
   * The tensor of `like` when it lies whole on `ipu`: an element-wise result of the same shape
   * laid out like it (Graph::clone) lines up with it tile by tile, so the vertices reading it need
   * no exchange.
   */
  layoutSource(like: Value, ipu: number): ValueRef | undefined {
    if (this.mc.opts.tileLayout === 'linear') return undefined;
    const r = this.refs.get(this.resolve(like));
    const b = r?.buffers?.length === 1 ? r.buffers[0]! : undefined;
    if (!r?.whole || !b || r.ipu !== ipu || r.expr === undefined || b.span.ipu !== ipu || b.span.elements !== numElements(like.type.shape)) return undefined;
    return r;
  }

  /** A new tensor for result `v` with the tile mapping of `like`, a tensor of the same shape (see layoutSource). */
  newResultLike(v: Value, ipu: number, like: ValueRef): string {
    const dt = deviceType(v.type.dtype);
    const label = this.valueLabel(v);
    const b = this.mc.memory.addSpan('activation', { ...like.buffers![0]!.span, bytesPerElement: dt.bytes }, this.current, label);
    this.touch([b, ...like.buffers!]);
    const name = this.valueName(v);
    this.lastResult = b;
    this.named.set(name, b);
    this.emit(`poplar::Tensor ${name} = ${this.g(ipu)}.clone(${dt.poplar}, ${like.expr}, ${this.debugName(label)});`);
    this.refs.set(v, { expr: name, ipu, roots: new Set(), buffers: [b], whole: true });
    return name;
  }

  /**
   * A result tensor without a tile mapping: the lowering maps it region by region like the
   * vertex's first output (so a vertex's outputs of different dtypes share tiles).
   */
  newUnmappedResult(v: Value, ipu: number): string {
    const dt = deviceType(v.type.dtype);
    const label = this.valueLabel(v);
    const like = this.lastResult;
    const n = numElements(v.type.shape);
    let b: Allocation;
    if (like && like.span.ipu === ipu && like.span.elements === n) {
      b = this.mc.memory.addSpan('activation', { ...like.span, bytesPerElement: dt.bytes }, this.current, label);
      this.touch([b]);
    } else {
      b = this.allocate('activation', v.type.dtype, v.type.shape, ipu, label);
    }
    const name = this.valueName(v);
    this.named.set(name, b);
    this.emit(`poplar::Tensor ${name} = ${this.g(ipu)}.addVariable(${dt.poplar}, ${shapeLiteral(v.type.shape)}, ${this.debugName(label)});`);
    this.refs.set(v, { expr: name, ipu, roots: new Set(), buffers: [b], whole: true });
    return name;
  }

  /**
   * Records the memory of a tensor that a PopLibs call creates (`shape` as the call makes it,
   * mapped as poplar-host maps it); the next `define` takes it as its result's memory.
   */
  countResult(dtype: DType, shape: readonly number[], ipu: number, label: string): void {
    const b = this.allocate('activation', dtype, shape, ipu, label, chooseMappingOffset(this.mc.memory.tilesPerIpu, shape));
    this.pending.push(b);
  }

  /** Records temporary memory a PopLibs call uses while it runs (made by the call, as poplar-host makes it). */
  countTemporary(dtype: DType, shape: readonly number[], ipu: number, label: string): void {
    this.allocate('temporary', dtype, shape, ipu, label, chooseMappingOffset(this.mc.memory.tilesPerIpu, shape));
  }

  /** A scalar constant tensor on one tile. */
  scalarConstant(dtype: DType, value: number, ipu: number): string {
    const dt = deviceType(dtype);
    const name = this.local('c');
    this.mc.memory.addTile('constant', ipu, 0, dt.bytes, this.current, 'a constant');
    this.emit(`poplar::Tensor ${name} = ${this.g(ipu)}.addConstant<${dt.host}>(${dt.poplar}, {1}, ${hostLiteral(dtype, value)}, "const");`);
    this.emit(`${this.g(ipu)}.setTileMapping(${name}, 0);`);
    return name;
  }

  /** A constant tensor with the given values, spread over the tiles. */
  constantTensor(t: Tensor, ipu: number, label: string): string {
    const dt = deviceType(t.dtype);
    const n = t.size;
    if (n <= 1) {
      const c = this.scalarConstant(t.dtype, n === 1 ? t.data[0]! : 0, ipu);
      const name = this.local('c');
      this.emit(`poplar::Tensor ${name} = ${c}.reshape(${shapeLiteral(t.shape)});`);
      return name;
    }
    // constants may share a debug label; each needs its own array
    const arr = this.mc.ids.fresh(`kConst_${label}`, 'k');
    const values = Array.from(t.data, (x) => hostLiteral(t.dtype, x));
    const rows: string[] = [];
    for (let i = 0; i < values.length; i += 8) rows.push(`    ${values.slice(i, i + 8).join(', ')},`);
    this.mc.fileScope.push(`const ${dt.host} ${arr}[${n}] = {\n${rows.join('\n')}\n};`);
    const { grain, minElements } = linearMappingParams(t.dtype);
    const b = this.allocate('constant', t.dtype, t.shape, ipu, label);
    const name = this.local('c');
    this.emit(`poplar::Tensor ${name} = ${this.g(ipu)}.addConstant<${dt.host}>(${dt.poplar}, ${shapeLiteral(t.shape)}, poplar::ArrayRef<${dt.host}>(${arr}, ${n}), ${this.debugName(label)});`);
    this.emit(`poputil::mapTensorLinearlyWithOffset(${this.g(ipu)}, ${name}, ${minElements}, ${grain}, ${b.span.offset});`);
    return name;
  }

  /**
   * The compute set for the vertices of the current op, which write the buffers `writes` (their
   * outputs) and read what the op touched so far; call `execute` once the vertices are added.
   * When merging is on, the vertex work since the last program step forms a region: the new
   * vertices join the first compute set of the region after every compute set and held-back state
   * write they depend on (one reads what the other writes), a new one at its end if there is none.
   * Without `writes` (unknown), the op gets a compute set of its own, alone in the program.
   */
  computeSet(label: string, writes?: readonly (Allocation | undefined)[]): string {
    const known = writes?.every((b): b is Allocation => b !== undefined) ? (writes as readonly Allocation[]) : undefined;
    const merge = this.mc.opts.mergeComputeSets !== false && known !== undefined;
    if (!merge) this.closeComputeSet();
    const w = new Set(known ?? []);
    const r = new Set([...this.tickTouched].filter((b) => !w.has(b)));
    const region = this.region;
    let at = 0;
    if (region) {
      region.levels.forEach((l, j) => {
        const members = meets(r, l.writes) || meets(w, l.reads) || meets(w, l.writes);
        const held = meets(r, l.deferredWrites) || meets(w, l.deferredReads) || meets(w, l.deferredWrites);
        if (members || held) at = j + 1;
      });
    }
    let level = region?.levels[at];
    if (!level) {
      const name = `cs${this.cs++}`;
      this.emit(`poplar::ComputeSet ${name} = d.graph.addComputeSet(${this.debugName(label)});`);
      level = { name, reads: new Set(), writes: new Set(), deferred: [], deferredReads: new Set(), deferredWrites: new Set(), touched: new Set(), made: new Set(), op: this.currentOp };
      if (merge) {
        this.region ??= { levels: [], deferredBytes: 0, insertAt: this.lines.length };
        this.region.levels.push(level);
      }
    }
    this.unexecuted = level.name;
    if (merge) {
      for (const b of r) level.reads.add(b);
      for (const b of w) level.writes.add(b);
      for (const b of this.tickTouched) level.touched.add(b);
      for (const b of w) if (this.touches.get(b)?.[0] === this.now) level.made.add(b);
    }
    return level.name;
  }

  /** Runs compute set `cs` (from `computeSet`): now, or with its region. */
  execute(cs: string): void {
    if (this.unexecuted !== cs) throw new Error(`internal: execute(${cs}) without computeSet`);
    this.unexecuted = undefined;
    if (this.region?.levels.some((l) => l.name === cs)) {
      this.region.insertAt = this.lines.length;
      return;
    }
    this.emit(`prog.add(poplar::program::Execute(${cs}));`);
  }

  /**
   * Program lines that read `reads` and write `writes` (a state write of `bytes`): held back in
   * the open region, after the compute sets and held-back lines they depend on (so that later
   * vertex work independent of them may still join those compute sets), or emitted now.
   */
  emitAfterComputeSet(lines: readonly string[], reads: readonly Allocation[], writes: readonly Allocation[], bytes: number): void {
    const region = this.region;
    if (!region || this.unexecuted !== undefined || region.deferredBytes + bytes > MERGE_DEFERRED_BYTES) {
      for (const l of lines) this.emit(l);
      return;
    }
    const r = new Set(reads);
    const w = new Set(writes);
    let at = 0;
    region.levels.forEach((l, j) => {
      if (meets(r, l.writes) || meets(w, l.reads) || meets(w, l.writes) || meets(r, l.deferredWrites) || meets(w, l.deferredReads) || meets(w, l.deferredWrites)) at = j;
    });
    const level = region.levels[at]!;
    for (const l of lines) level.deferred.push(l);
    for (const b of reads) level.deferredReads.add(b);
    for (const b of writes) level.deferredWrites.add(b);
    region.deferredBytes += bytes;
    for (const b of [...reads, ...writes]) level.touched.add(b);
    region.insertAt = this.lines.length;
  }

  /**
   * Emits the open region: each compute set's Execute, then the lines held back behind it, after
   * the code of its last member (the code since then makes no program steps). In the memory plan
   * each compute set is a tick of its own after its members' ticks, as in the program: every buffer
   * it and the lines behind it touch is live then, and the outputs it makes from then on.
   */
  closeComputeSet(): void {
    const region = this.region;
    if (!region) return;
    this.region = undefined;
    const before = this.now;
    for (const l of region.levels) {
      this.now++;
      this.opAt.push(l.op);
      for (const b of l.touched) {
        const r = this.touches.get(b);
        if (r) r[1] = Math.max(r[1], this.now);
        else this.touches.set(b, [this.now, this.now]);
      }
      for (const b of l.made) this.touches.get(b)![0] = this.now;
    }
    // the op being lowered goes on after the region (its program step follows it), on a tick of its
    // own: what it made before that step is made then
    this.now++;
    this.opAt.push(this.currentOp);
    for (const b of this.tickTouched) {
      const r = this.touches.get(b)!;
      if (r[0] === before) [r[0], r[1]] = [this.now, Math.max(r[1], this.now)];
    }
    const steps: string[] = [];
    for (const l of region.levels) {
      steps.push(`  prog.add(poplar::program::Execute(${l.name}));`);
      for (const x of l.deferred) steps.push(`  ${x}`);
    }
    this.lines.splice(region.insertAt, 0, ...steps);
  }
}

/** A literal for a host-side constant value of dtype `t` (half constants are given as float). */
export function hostLiteral(t: DType, v: number): string {
  return elementLiteral(t, v);
}
