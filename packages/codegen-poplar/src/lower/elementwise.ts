import { Attrs, DType, Op, Value, isFloat, isNarrowInt, numElements, shapesEqual } from '@tilegraph/ir';
import { ALIAS_OPS, GraphEmitter, shapeLiteral } from '../context.js';
import { deviceType, elementLiteral } from '../types.js';
import { floatClipExpr, intClipExpr } from './clip.js';
import { absorbedSquare } from './square-sums.js';

/**
 * Element-wise ops. Chains of element-wise ops over one shape are fused into one generated
 * MultiVertex: each vertex computes a contiguous region of the outputs on the tile that holds
 * it, reading its inputs through broadcast views so that every input region has the size of
 * the output region. Scalar constants are written into the vertex code. Each op's result is
 * rounded to its dtype, so a chain computes what the op-by-op reference computes.
 */

export const ELEMENTWISE_OP_NAMES = [
  'add', 'sub', 'mul', 'div', 'pow', 'max', 'min', 'neg', 'abs', 'exp', 'log', 'sqrt', 'reciprocal', 'tanh', 'sigmoid',
  'relu', 'gelu', 'erf', 'sin', 'cos', 'floor', 'ceil', 'round', 'sign', 'clip', 'where', 'equal', 'less', 'greater', 'and',
  'or', 'not', 'cast', 'bitwise_and', 'bitwise_or', 'bitwise_xor', 'bitwise_not', 'bitcast',
] as const;

const ELEMENTWISE = new Set<string>(ELEMENTWISE_OP_NAMES);
/** Element kinds whose float code (the prelude's expFloat and erfFloat) gains from wider vectors. */
const WIDE_KINDS = new Set(['exp', 'erf', 'sigmoid']);
/** The fewest elements an element-wise compute set has for its vertex class to be built for wider vectors. */
const WIDE_MIN_ELEMENTS = 16384;
/**
 * Below this many elements a compute set has a few of them a tile: its vertex class is built
 * without vectorised loops (TG_SMALL in the prelude), which would only add build time.
 */
const SMALL_MAX_ELEMENTS = 8192;

export function isElementwise(op: Op): boolean {
  return ELEMENTWISE.has(op.kind);
}

/** An argument of an expression node: another node or an input of the vertex. */
export type EwArg = { readonly node: number } | { readonly input: number };

/** One operation of a fused expression: an IR element-wise op, or a helper the lowerings use. */
export interface EwNode {
  /** IR op name, or 'wrap_index' {dim} (int32 index → uint32 in [0, dim)), 'clamp_index' {max}. */
  readonly kind: string;
  readonly dtype: DType;
  readonly args: readonly EwArg[];
  readonly attrs: Attrs;
}

export interface EwInput {
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** The input tensor (on the vertex's IPU); unused for inline constants. */
  readonly tensor?: () => string;
  /** A scalar constant written into the vertex code. */
  readonly constant?: number;
}

export interface EwSpec {
  readonly shape: readonly number[];
  readonly ipu: number;
  readonly nodes: readonly EwNode[];
  readonly inputs: readonly EwInput[];
  /** Nodes whose values are written out, with the local name of each output tensor. */
  readonly outputs: readonly { readonly node: number; readonly tensor: string; readonly mapHere?: boolean }[];
  readonly label: string;
}

// ---- C++ expressions ----

interface TypeNames {
  /** The dtype written as the template parameter T, if any. */
  readonly templated?: DType;
}

function typeName(t: DType, tn: TypeNames): string {
  return tn.templated === t ? 'T' : deviceType(t).device;
}

/** `e` converted to element type `S`: a functional cast, or static_cast for names of two words ("unsigned char"). */
function convert(S: string, e: string): string {
  return S.includes(' ') ? `static_cast<${S}>(${e})` : `${S}(${e})`;
}

/** The C++ expression of one node, of the node's element type. */
function nodeExpr(n: EwNode, a: readonly string[], at: readonly DType[], tn: TypeNames): string {
  const rt = n.dtype;
  const S = typeName(rt, tn);
  const f = (x: string) => `float(${x})`;
  const t0 = at[0]!;
  const num = (s: string) => (isFloat(rt) ? `${S}(${s})` : s);
  const [x, y] = [a[0]!, a[1]!];
  if (n.kind === 'cast') return castExpr(x, t0, rt, S);
  if (n.kind === 'wrap_index') return `tg::wrapIndex(${x}, ${n.attrs['dim'] as number}u)`;
  if (n.kind === 'clamp_index') return `tg::clampIndex(${x}, ${n.attrs['max'] as number})`;
  if (n.kind === 'where') return `(${x} ? ${y} : ${a[2]!})`;
  if (n.kind === 'and') return `(${x} && ${y})`;
  if (n.kind === 'or') return `(${x} || ${y})`;
  if (n.kind === 'not') return `(!${x})`;
  // integer operands only (the verifier checks): the result converted back to the operand type
  if (n.kind === 'bitwise_and') return convert(S, `${x} & ${y}`);
  if (n.kind === 'bitwise_or') return convert(S, `${x} | ${y}`);
  if (n.kind === 'bitwise_xor') return convert(S, `${x} ^ ${y}`);
  if (n.kind === 'bitwise_not') return convert(S, `~${x}`);
  if (n.kind === 'bitcast') return bitcastExpr(x, t0, rt);
  if (n.kind === 'equal' || n.kind === 'less' || n.kind === 'greater') {
    const op = { equal: '==', less: '<', greater: '>' }[n.kind];
    return isFloat(t0) ? `(${f(x)} ${op} ${f(y)})` : `(${x} ${op} ${y})`;
  }
  // narrow integers: the int32 expression of the operands (exact in int), wrapped to the width;
  // its low bits are those of the reference's exact result, which wraps at the width
  if (isNarrowInt(rt)) {
    return convert(S, nodeExpr({ ...n, dtype: 'int32' }, a.map((v) => `int(${v})`), a.map(() => 'int32'), tn));
  }
  if (isFloat(rt)) {
    switch (n.kind) {
      case 'add':
        return num(`${f(x)} + ${f(y)}`);
      case 'sub':
        return num(`${f(x)} - ${f(y)}`);
      case 'mul':
        return num(`${f(x)} * ${f(y)}`);
      case 'div':
        return num(`${f(x)} / ${f(y)}`);
      case 'pow':
        return num(`tg::powFloat(${f(x)}, ${f(y)})`);
      case 'max':
        return num(`tg::maxFloat(${f(x)}, ${f(y)})`);
      case 'min':
        return num(`tg::minFloat(${f(x)}, ${f(y)})`);
      case 'neg':
        return num(`-${f(x)}`);
      case 'abs':
        return num(`std::fabs(${f(x)})`);
      case 'exp':
        return num(`tg::expFloat(${f(x)})`);
      case 'erf':
        return num(`tg::erfFloat(${f(x)})`);
      case 'log':
      case 'sqrt':
      case 'tanh':
      case 'sin':
      case 'cos':
      case 'floor':
      case 'ceil':
        return num(`std::${n.kind}(${f(x)})`);
      case 'round':
        return num(`std::nearbyint(${f(x)})`);
      case 'reciprocal':
        return num(`1.0f / ${f(x)}`);
      case 'sigmoid':
        return num(`tg::sigmoidFloat(${f(x)})`);
      case 'relu':
        return num(`tg::reluFloat(${f(x)})`);
      case 'sign':
        return num(`tg::signFloat(${f(x)})`);
      case 'gelu':
        return num(n.attrs['approximate'] === 'tanh' ? `tg::geluTanh(${f(x)})` : `tg::geluErf(${f(x)})`);
      case 'clip':
        return `${S}(${floatClipExpr(f(x), bound(n.attrs['min'], -Infinity), bound(n.attrs['max'], Infinity))})`;
    }
  }
  if (rt === 'int32') {
    const u = (v: string) => `unsigned(${v})`;
    switch (n.kind) {
      case 'add':
        return `int(${u(x)} + ${u(y)})`;
      case 'sub':
        return `int(${u(x)} - ${u(y)})`;
      case 'mul':
        return `int(${u(x)} * ${u(y)})`;
      case 'div':
        return `tg::divInt(${x}, ${y})`;
      case 'pow':
        return `tg::powInt(${x}, ${y})`;
      case 'max':
        return `(${x} > ${y} ? ${x} : ${y})`;
      case 'min':
        return `(${x} < ${y} ? ${x} : ${y})`;
      case 'neg':
        return `int(0u - ${u(x)})`;
      case 'abs':
        return `(${x} < 0 ? int(0u - ${u(x)}) : ${x})`;
      case 'relu':
        return `(${x} > 0 ? ${x} : 0)`;
      case 'sign':
        return `int((${x} > 0) - (${x} < 0))`;
      case 'clip':
        return intClipExpr(x, bound(n.attrs['min'], -Infinity), bound(n.attrs['max'], Infinity), 'int32');
    }
  }
  if (rt === 'uint32') {
    switch (n.kind) {
      case 'add':
        return `unsigned(${x} + ${y})`;
      case 'sub':
        return `unsigned(${x} - ${y})`;
      case 'mul':
        return `unsigned(${x} * ${y})`;
      case 'div':
        return `tg::divUint(${x}, ${y})`;
      case 'pow':
        return `tg::powUint(${x}, ${y})`;
      case 'max':
        return `(${x} > ${y} ? ${x} : ${y})`;
      case 'min':
        return `(${x} < ${y} ? ${x} : ${y})`;
      case 'neg':
        return `unsigned(0u - ${x})`;
      case 'abs':
      case 'relu':
        return x;
      case 'sign':
        return `(${x} > 0u ? 1u : 0u)`;
      case 'clip':
        return intClipExpr(x, bound(n.attrs['min'], -Infinity), bound(n.attrs['max'], Infinity), 'uint32');
    }
  }
  throw new Error(`internal: no element-wise expression for ${n.kind} on ${rt}`);
}

function bound(v: unknown, dflt: number): number {
  return typeof v === 'number' ? v : dflt;
}

/** A cast with the reference's conversion rules (see the cast op). */
/** The bits of a 32-bit value read as another 32-bit type. */
function bitcastExpr(x: string, from: DType, to: DType): string {
  if (from === to) return x;
  if (to === 'float32') return `tg::bitsAsFloat(${x})`;
  if (from === 'float32') return to === 'int32' ? `tg::bitsAsInt(${x})` : `unsigned(tg::bitsAsInt(${x}))`;
  return to === 'int32' ? `int(${x})` : `unsigned(${x})`;
}

function castExpr(x: string, from: DType, to: DType, S: string): string {
  if (from === to) return x;
  if (to === 'bool') return isFloat(from) ? `tg::truthy(float(${x}))` : `(${x} != 0)`;
  if (isFloat(to)) return `${S}(float(${x}))`;
  if (to === 'int32') return isFloat(from) ? `tg::toInt32(float(${x}))` : `int(${x})`;
  if (to === 'uint32') return isFloat(from) ? `tg::toUint32(float(${x}))` : `unsigned(${x})`;
  // floats truncate (NaN and inf give 0) and wrap modulo 2^32, then to the width, as the reference does
  if (isNarrowInt(to)) return convert(S, isFloat(from) ? `tg::toInt32(float(${x}))` : x);
  throw new Error(`internal: cast to ${to}`);
}

// ---- vertex generation ----

/** Element types narrower than the IPU's 32-bit atomic store (T may be half). */
function mayBeSubWord(type: string): boolean {
  return type === 'T' || type === 'half' || type === 'bool' || SUB_WORD_INTEGERS.has(type);
}

const SUB_WORD_INTEGERS = new Set(['signed char', 'unsigned char', 'short', 'unsigned short']);

/** A MultiVertex output vector; sub-word ones are aligned to whole 32-bit words. */
export function outputVector(type: string): string {
  return mayBeSubWord(type) ? `poplar::Vector<${type}, poplar::VectorLayout::SPAN, 4>` : `poplar::Vector<${type}>`;
}

/**
 * The loop of a MultiVertex's compute(workerId) over `n` elements writing outputs of `types`:
 * each worker takes one contiguous run of whole 32-bit words of every output (tg::workerBegin),
 * so that no two workers store into one word, and each worker's loads and stores are sequential.
 */
export function workerLoop(types: readonly string[], n: string, body: readonly string[], i = 'i'): string[] {
  const chunk = types.some(mayBeSubWord) ? `tg::wordChunk<${[...new Set(types)].join(', ')}>()` : '1u';
  return [
    `const unsigned workBegin = tg::workerBegin(${n}, ${chunk}, workerId, numWorkers());`,
    `const unsigned workEnd = tg::workerBegin(${n}, ${chunk}, workerId + 1, numWorkers());`,
    `for (unsigned ${i} = workBegin; ${i} < workEnd; ++${i}) {`,
    ...body.map((l) => `  ${l}`),
    '}',
  ];
}

/**
 * The largest periodic input (elements) whose period repeats along the output: a vertex whose
 * region wraps around reads all of it. One that is read once (a row statistic broadcast along
 * its row) has no such bound: each vertex reads only the elements its region covers.
 */
const MAX_PERIODIC_ELEMENTS = 4096;

/**
 * How a broadcast input repeats along the flat output: when its dims other than 1 are one block
 * of the output's dims, output element g reads its element (g / inner) % size, `inner` being the
 * product of the output dims after the block (a per-channel scale: the image size; a bias: 1).
 * Undefined for other broadcasts, for inputs of the output's size and for large inputs.
 */
export function periodicBroadcast(inShape: readonly number[], outShape: readonly number[]): { inner: number; size: number } | undefined {
  const size = numElements(inShape);
  if (inShape.length > outShape.length || size <= 1 || size === numElements(outShape)) return undefined;
  const padded = [...new Array<number>(outShape.length - inShape.length).fill(1), ...inShape];
  const kept = outShape.map((d, k) => k).filter((k) => outShape[k]! > 1 && padded[k] === outShape[k]);
  if (kept.length === 0) return undefined;
  const first = kept[0]!, last = kept[kept.length - 1]!;
  // inside the block every dim is the output's (dims of size 1 in both included), outside it 1
  for (let k = 0; k < outShape.length; k++) if (k >= first && k <= last ? padded[k] !== outShape[k] : padded[k] !== 1) return undefined;
  const inner = numElements(outShape.slice(last + 1));
  if (size > MAX_PERIODIC_ELEMENTS && inner * size !== numElements(outShape)) return undefined;
  return { inner, size };
}

interface PeriodicInput {
  readonly local: string;
  readonly field: string;
  readonly type: string;
  readonly inner: number;
  readonly size: number;
}

/**
 * workerLoop for a vertex with periodic inputs (field inJ holds the input's elements from inJFrom
 * on; at the vertex's first output the input is at element inJAt, inJAlong outputs into its run
 * when inner > 1): each worker's run is cut into segments in which every periodic input either
 * stays on one element (inner > 1) or runs along its elements (inner 1), so the loop over a
 * segment reads like the one over plain vector inputs. Where a worker starts is the vertex's
 * start moved on by workBegin, divided only when that crosses a run or the period (a tile has no
 * integer divide, and on the host one per worker costs more than a small vertex's arithmetic);
 * segment by segment it only advances.
 */
function segmentedWorkerLoop(types: readonly string[], n: string, periodic: readonly PeriodicInput[], body: readonly string[]): string[] {
  const loop = workerLoop(types, n, []);
  const setup: string[] = [];
  const segment: string[] = ['unsigned segmentEnd = workEnd;'];
  const advance: string[] = [];
  const inner: string[] = [];
  for (const p of periodic) {
    // the period's sizes are fields (set per vertex), so the vertex does not depend on the shapes
    const runLength = `${p.field}Inner`, period = `${p.field}Size`;
    const element = `at${p.local}`;
    if (p.inner > 1) {
      // element of the input, and how far into its run of `inner` outputs
      const along = `along${p.local}`;
      setup.push(
        `unsigned ${along} = ${p.field}Along + workBegin, ${element} = ${p.field}At;`,
        `if (${along} >= ${runLength}) {`,
        `  ${element} += ${along} / ${runLength};`,
        `  ${along} %= ${runLength};`,
        '}',
        `if (${element} >= ${period}) ${element} %= ${period};`,
      );
      segment.push(`const ${p.type} ${p.local} = ${p.field}[${element} - ${p.field}From];`);
      segment.push(`if (segmentEnd - s > ${runLength} - ${along}) segmentEnd = s + (${runLength} - ${along});`);
      advance.push(`if ((${along} += segmentEnd - s) == ${runLength}) {`, `  ${along} = 0;`, `  if (++${element} == ${period}) ${element} = 0;`, '}');
    } else {
      setup.push(`unsigned ${element} = ${p.field}At + workBegin;`, `if (${element} >= ${period}) ${element} %= ${period};`);
      segment.push(`if (segmentEnd - s > ${period} - ${element}) segmentEnd = s + (${period} - ${element});`);
      // through a pointer: the vectoriser does not follow the index arithmetic
      segment.push(`const ${p.type} *${p.local}Run = &${p.field}[${element} - ${p.field}From];`);
      inner.push(`const ${p.type} ${p.local} = ${p.local}Run[i - s];`);
      advance.push(`if ((${element} += segmentEnd - s) == ${period}) ${element} = 0;`);
    }
  }
  return [
    ...loop.slice(0, 2),
    ...setup,
    'for (unsigned s = workBegin; s < workEnd;) {',
    ...segment.map((l) => `  ${l}`),
    // a std::size_t index: the vectoriser cannot tell an unsigned one, widened for the address,
    // does not wrap when it starts at s rather than at a worker's fixed start
    '  for (std::size_t i = s; i < segmentEnd; ++i) {',
    ...[...inner, ...body].map((l) => `    ${l}`),
    '  }',
    ...advance.map((l) => `  ${l}`),
    '  s = segmentEnd;',
    '}',
  ];
}

/** Emits one fused vertex class and the compute set running it over the outputs' tiles. */
export function emitElementwise(e: GraphEmitter, spec: EwSpec): void {
  const n = numElements(spec.shape);
  if (n === 0 || spec.outputs.length === 0) return;
  const floats = new Set<DType>();
  for (const nd of spec.nodes) if (isFloat(nd.dtype)) floats.add(nd.dtype);
  for (const inp of spec.inputs) if (isFloat(inp.dtype)) floats.add(inp.dtype);
  const templated = floats.size === 1 ? [...floats][0]! : undefined;
  const tn: TypeNames = templated ? { templated } : {};

  // vertex fields: vector inputs, scalar inputs, inline constants
  const fields: string[] = [];
  const hoisted: string[] = [];
  const perElement: string[] = [];
  const connections: { field: string; expr: string; scalar: boolean; period?: { inner: number; size: number } }[] = [];
  const periodic: PeriodicInput[] = [];
  const inputExprs: string[] = [];
  spec.inputs.forEach((inp, j) => {
    const S = typeName(inp.dtype, tn);
    const local = `x${j}`;
    inputExprs.push(local);
    if (inp.constant !== undefined) {
      hoisted.push(`const ${S} ${local} = ${convert(S, elementLiteral(inp.dtype, inp.constant))};`);
      return;
    }
    if (numElements(inp.shape) === 1) {
      fields.push(`  poplar::Input<${S}> in${j};`);
      hoisted.push(`const ${S} ${local} = *in${j};`);
      connections.push({ field: `in${j}`, expr: inp.tensor!(), scalar: true });
    } else {
      fields.push(`  poplar::Input<poplar::Vector<${S}>> in${j};`);
      const period = periodicBroadcast(inp.shape, spec.shape);
      if (period) periodic.push({ local, field: `in${j}`, type: S, ...period });
      else perElement.push(`const ${S} ${local} = in${j}[i];`);
      connections.push({ field: `in${j}`, expr: inp.tensor!(), scalar: false, ...(period ? { period } : {}) });
    }
  });
  fields.push(
    ...periodic.flatMap((p) => [
      `  unsigned ${p.field}From;`,
      `  unsigned ${p.field}At;`,
      ...(p.inner > 1 ? [`  unsigned ${p.field}Along;`] : []),
      `  unsigned ${p.field}Inner;`,
      `  unsigned ${p.field}Size;`,
    ]),
  );
  const nodeExprs: string[] = [];
  spec.nodes.forEach((nd, k) => {
    const args = nd.args.map((a) => ('node' in a ? nodeExprs[a.node]! : inputExprs[a.input]!));
    const argTypes = nd.args.map((a) => ('node' in a ? spec.nodes[a.node]!.dtype : spec.inputs[a.input]!.dtype));
    perElement.push(`const ${typeName(nd.dtype, tn)} v${k} = ${nodeExpr(nd, args, argTypes, tn)};`);
    nodeExprs.push(`v${k}`);
  });
  const outTypes = spec.outputs.map((o) => typeName(spec.nodes[o.node]!.dtype, tn));
  // exp and erf in plain arithmetic are worth the wider vectors (see TG_WIDE in the prelude) on
  // large tensors; on small ones, the clones would only add build time
  const wide = n >= WIDE_MIN_ELEMENTS && spec.nodes.some((nd) => isFloat(nd.dtype) && (WIDE_KINDS.has(nd.kind) || (nd.kind === 'gelu' && nd.attrs['approximate'] !== 'tanh')));
  const build = wide ? 'TG_WIDE ' : n < SMALL_MAX_ELEMENTS ? 'TG_SMALL ' : '';
  spec.outputs.forEach((o, m) => {
    fields.push(`  poplar::Output<${outputVector(outTypes[m]!)}> out${m};`);
    perElement.push(`out${m}[i] = v${o.node};`);
  });
  const body = (name: string) =>
    [
      ...(templated ? ['template <typename T>'] : []),
      `class ${name} : public poplar::MultiVertex {`,
      'public:',
      ...fields,
      '',
      `  ${build}bool compute(unsigned workerId) {`,
      '    const unsigned n = out0.size();',
      ...hoisted.map((l) => `    ${l}`),
      ...(periodic.length ? segmentedWorkerLoop(outTypes, 'n', periodic, perElement) : workerLoop(outTypes, 'n', perElement)).map((l) => `    ${l}`),
      '    return true;',
      '  }',
      '};',
    ].join('\n');
  const cls = e.mc.codelets.add('Fused', body('%'), body, templated ? ['float', 'half'] : undefined);
  const vertex = e.mc.codelets.vertexName(cls, templated ? deviceType(templated).device : undefined);

  // host side: flat views of every input and output, one vertex per region of the first output
  const ipu = spec.ipu;
  const g = e.g(ipu);
  const flat: string[] = [];
  for (const c of connections) {
    const inp = spec.inputs[Number(c.field.slice(2))]!;
    const local = e.local('f');
    const src = c.scalar
      ? `scalarOf(${c.expr})`
      : shapesEqual(inp.shape, spec.shape) || c.period
        ? `${c.expr}.flatten()`
        : `broadcastTo(${c.expr}, ${shapeLiteral(spec.shape)}).flatten()`;
    e.emit(`poplar::Tensor ${local} = ${src};`);
    flat.push(local);
  }
  const outFlat = spec.outputs.map((o) => {
    const local = e.local('f');
    e.emit(`poplar::Tensor ${local} = ${o.tensor}.flatten();`);
    return local;
  });
  const cs = e.computeSet(spec.label, spec.outputs.map((o) => e.bufferNamed(o.tensor)));
  const connected = [
    ...connections.map((c, i) =>
      c.scalar ? `{"${c.field}", ${flat[i]!}, true}` : c.period ? `{"${c.field}", ${flat[i]!}, false, false, ${c.period.inner}, ${c.period.size}}` : `{"${c.field}", ${flat[i]!}}`,
    ),
    ...outFlat.map((f, m) => (spec.outputs[m]!.mapHere ? `{"out${m}", ${f}, false, true}` : `{"out${m}", ${f}}`)),
  ];
  e.emit(`addRegionVertices(${g}, ${cs}, "${vertex}", ${outFlat[0]!}, {${connected.join(', ')}}, ${Math.max(1, spec.nodes.length)});`);
  e.execute(cs);
  // the vertices sit on the tiles of the first output; each holds a word of its own and, per
  // field, a pointer (scalar) or a pointer and a size (vector)
  const span = e.bufferNamed(spec.outputs[0]!.tensor)?.span;
  // a periodic input adds From, At, Inner and Size (and Along when it runs along an element)
  const stateBytes = 4 + connections.reduce((n, c) => n + (c.scalar ? 4 : 8), 0) + 8 * outFlat.length + periodic.reduce((n, p) => n + (p.inner > 1 ? 20 : 16), 0);
  e.mc.memory.addVertices(ipu, span?.offset ?? 0, span?.tilesUsed ?? Math.min(n, e.mc.memory.tilesPerIpu), stateBytes, e.current);
}

/**
 * A single-node expression over tensors (used by other lowerings: index normalisation, the
 * divide of a mean, casts).
 */
export function emitMap(
  e: GraphEmitter,
  kind: string,
  dtype: DType,
  shape: readonly number[],
  ipu: number,
  inputs: readonly EwInput[],
  out: string,
  label: string,
  attrs: Attrs = {},
): void {
  emitElementwise(e, {
    shape,
    ipu,
    nodes: [{ kind, dtype, args: inputs.map((_, i) => ({ input: i })), attrs }],
    inputs,
    outputs: [{ node: 0, tensor: out }],
    label,
  });
}

/**
 * Tensor `t` of an 8- or 16-bit integer type converted to a new int32 tensor, for the PopLibs calls
 * and vertices that have no instances for the narrow types.
 */
export function widenToInt32(e: GraphEmitter, t: string, dtype: DType, shape: readonly number[], ipu: number, label: string): string {
  const wide = e.newTensor('int32', shape, ipu, label);
  emitMap(e, 'cast', 'int32', shape, ipu, [{ dtype, shape, tensor: () => t }], wide, label);
  return wide;
}

// ---- fusion of IR ops ----

interface Group {
  readonly ops: Op[];
  readonly members: Set<Op>;
  readonly shape: readonly number[];
  readonly ipu: number;
}

/**
 * Groups element-wise ops into fused vertices while the graph is lowered in topological order.
 * A group stays open until an op outside it needs one of its values; nothing outside an open
 * group depends on it, so closing (emitting) it then is always in dependency order.
 */
export class Fusion {
  private open: Group[] = [];
  private readonly outputs: Set<Value>;
  private readonly maxOps: number;

  constructor(private readonly e: GraphEmitter) {
    this.outputs = new Set(e.graph.outputs.map((o) => o.value));
    this.maxOps = e.mc.opts.maxFusedOps ?? 32;
  }

  private groupOf(v: Value): Group | undefined {
    const p = this.e.resolve(v).producer;
    return this.open.find((g) => g.members.has(p));
  }

  /** Adds an element-wise op to a compatible open group, or opens one. */
  add(op: Op): void {
    const ipu = this.e.ipuOf(op);
    const shape = op.result.type.shape;
    const feeding = [...new Set(op.operands.map((v) => this.groupOf(v)).filter((g): g is Group => g !== undefined))];
    const fits = (g: Group) => g.ipu === ipu && shapesEqual(g.shape, shape);
    // every open group feeding the op that fits joins it (two chains meeting, as a ReLU's mask
    // and the gradient it gates): nothing outside an open group reads its values, so the groups'
    // ops one group after the other are still in dependency order
    const joining: Group[] = [];
    let size = 1;
    for (const g of feeding) {
      if (fits(g) && size + g.ops.length <= this.maxOps) {
        joining.push(g);
        size += g.ops.length;
      } else this.close(g);
    }
    const [target, ...others] = joining;
    if (target) {
      for (const g of others) {
        target.ops.push(...g.ops);
        for (const m of g.ops) target.members.add(m);
        this.open = this.open.filter((x) => x !== g);
      }
      target.ops.push(op);
      target.members.add(op);
    } else this.open.push({ ops: [op], members: new Set([op]), shape: [...shape], ipu });
  }

  /** Values read after the ops being lowered (a loop body's results): fused groups write them out. */
  keep(values: readonly Value[]): void {
    for (const v of values) this.outputs.add(v);
  }

  /** Closes the group producing `v`, if one is open. */
  closeProducing(v: Value): void {
    const g = this.groupOf(v);
    if (g) this.close(g);
  }

  /** Closes the groups producing any operand of `op`. */
  closeFeeding(op: Op): void {
    for (const v of op.operands) {
      const g = this.groupOf(v);
      if (g) this.close(g);
    }
  }

  closeAll(): void {
    while (this.open.length) this.close(this.open[0]!);
  }

  /** For v = mul(x, x) that its one reduction takes as SQUARE_ADD of x, that x (see square-sums.ts). */
  squaredOperand(v: Value): Value | undefined {
    return this.outputs.has(v) ? undefined : absorbedSquare(v, (a, b) => this.e.ipuOf(a) === this.e.ipuOf(b));
  }

  private usedOutside(v: Value, members: Set<Op>): boolean {
    if (this.outputs.has(v)) return true;
    // squares a reduction takes from their operand need not be written; that operand must be
    if (this.squaredOperand(v)) return false;
    for (const u of v.uses) {
      if (members.has(u.op) && this.squaredOperand(u.op.result) === v) return true;
      if (members.has(u.op)) continue;
      if (ALIAS_OPS.has(u.op.kind)) {
        if (this.usedOutside(u.op.result, members)) return true;
        continue;
      }
      return true;
    }
    return false;
  }

  private close(g: Group): void {
    this.open = this.open.filter((x) => x !== g);
    const e = this.e;
    const nodeOf = new Map<Value, number>();
    const inputs: EwInput[] = [];
    const inputOf = new Map<Value, number>();
    const nodes: EwNode[] = [];
    const argOf = (v0: Value): EwArg => {
      const v = e.resolve(v0);
      const k = nodeOf.get(v);
      if (k !== undefined) return { node: k };
      let j = inputOf.get(v);
      if (j === undefined) {
        j = inputs.length;
        inputOf.set(v, j);
        const r = e.ref(v);
        const scalarConst = r.constant && r.constant.size === 1 ? r.constant.data[0]! : undefined;
        inputs.push(
          scalarConst !== undefined
            ? { dtype: v.type.dtype, shape: v.type.shape, constant: scalarConst }
            : { dtype: v.type.dtype, shape: v.type.shape, tensor: () => e.tensor(v, g.ipu) },
        );
      }
      return { input: j };
    };
    for (const op of g.ops) {
      const args = op.operands.map(argOf);
      nodeOf.set(op.result, nodes.length);
      nodes.push({ kind: op.kind, dtype: op.result.type.dtype, args, attrs: op.attrs });
    }
    const first = g.ops[0]!;
    e.current = first;
    e.comment(`fused: ${g.ops.map((o) => `%${o.result.id}=${o.kind}`).join(' ')}  ${e.mc.location(first)}`);
    const outputs: { node: number; tensor: string; mapHere?: boolean }[] = [];
    // the first output lies like a whole input of the same shape (no exchange), else spread over the tiles
    const like = [...inputOf.keys()].filter((v) => shapesEqual(v.type.shape, g.shape)).map((v) => e.layoutSource(v, g.ipu)).find((r) => r !== undefined);
    for (const op of g.ops) {
      if (!this.usedOutside(op.result, g.members)) continue;
      // the other outputs follow the first one's regions
      if (outputs.length === 0) outputs.push({ node: nodeOf.get(op.result)!, tensor: like ? e.newResultLike(op.result, g.ipu, like) : e.newResult(op.result, g.ipu) });
      else outputs.push({ node: nodeOf.get(op.result)!, tensor: e.newUnmappedResult(op.result, g.ipu), mapHere: true });
    }
    emitElementwise(e, { shape: g.shape, ipu: g.ipu, nodes, inputs, outputs, label: `fused_${first.kind}` });
    e.onEmitted?.(g.ops);
  }
}
