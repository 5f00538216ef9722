import { DType, DiagnosticError, Graph, LOW_FLOAT_DTYPES, NARROW_INT_DTYPES, integerRange, isInteger, isLowFloat, isNarrowInt, Tensor, TensorType, castScalar, error, formatShape, halfBitsToFloat, numElements, shapesEqual } from '@tilegraph/ir';
import { runShape } from './io.js';

/**
 * What `run` and `runAsync` accept for an input: a Tensor of the input's dtype and run shape, or
 * its elements in row-major order as a typed array or a flat array, or a nested array of the run
 * shape. Typed arrays by dtype: float32 Float32Array, float16 Uint16Array (IEEE half bits, as
 * numpy's float16 buffers hold them), float64 Float64Array, int32 Int32Array, uint32 Uint32Array,
 * bool Uint8Array of 0 and 1. Any other pairing is refused rather than converted: converting
 * would hide a mistake such as float64 data for a float32 model.
 */
export type InputArray = Float32Array | Float64Array | Int32Array | Uint32Array | Uint16Array | Uint8Array;
export type NestedNumbers = readonly (number | boolean | NestedNumbers)[];
export type RunInput = Tensor | InputArray | NestedNumbers;
export type RunInputs = Readonly<Record<string, RunInput>>;

const TYPED_ARRAY: Readonly<Record<DType, string>> = {
  float32: 'Float32Array',
  float16: 'Uint16Array',
  float64: 'Float64Array',
  int32: 'Int32Array',
  uint32: 'Uint32Array',
  bool: 'Uint8Array',
  // narrow integers and low-precision floats are given as the arrays the host holds them in
  ...Object.fromEntries(NARROW_INT_DTYPES.map((d) => [d, 'Int32Array'])),
  ...Object.fromEntries(LOW_FLOAT_DTYPES.map((d) => [d, 'Float32Array'])),
} as Record<DType, string>;

/** "float32[32,16] (8 micro-batches of float32[4,16])": what one run of an input takes. */
function expectation(part: TensorType, n: number): string {
  return `${part.dtype}${formatShape(runShape(part, n))} ${perMicroBatch(part, n)}`;
}

function perMicroBatch(part: TensorType, n: number): string {
  return `(${n} micro-batches of ${part.dtype}${formatShape(part.shape)})`;
}

const LAYOUT_NOTE = 'a run consumes micro-batch × deviceIterations × gradientAccumulation × replicationFactor samples (replicas / input group size with inputReplicaGrouping)';

/** The kind of a typed array ('Float32Array', also for subclasses such as Buffer and arrays of another realm), or of another view ('DataView'). */
function viewKind(v: ArrayBufferView): string {
  return (v as unknown as { [Symbol.toStringTag]?: string })[Symbol.toStringTag] ?? 'ArrayBufferView';
}

function describe(v: unknown): string {
  if (v === null || v === undefined) return String(v);
  if (v instanceof Tensor) return `a Tensor ${v.dtype}${formatShape(v.shape)}`;
  if (ArrayBuffer.isView(v)) {
    const kind = viewKind(v);
    return `${/^[AEIOU]/.test(kind) ? 'an' : 'a'} ${kind}${'length' in v ? ` of ${(v as unknown as ArrayLike<unknown>).length} elements` : ''}`;
  }
  if (Array.isArray(v)) return `an array of ${v.length} elements`;
  if (typeof v === 'object') return `an object (${Object.prototype.toString.call(v)})`;
  return `a ${typeof v}`;
}

/**
 * Checks the inputs of one run against the model's inputs and returns each as a Tensor of its
 * run shape. Every problem — a missing or unknown name, a wrong dtype, length, shape or element —
 * is a diagnostic naming the input, what it expects and what was given.
 */
export function runInputTensors(inputs: unknown, types: readonly { name: string; type: TensorType }[], n: number): Record<string, Tensor> {
  if (inputs === null || typeof inputs !== 'object' || Array.isArray(inputs) || inputs instanceof Tensor || ArrayBuffer.isView(inputs)) {
    throw new DiagnosticError(
      error(`the inputs must be an object mapping each input's name to its value; got ${describe(inputs)}`, undefined, [`inputs: ${types.map((t) => `${t.name}: ${expectation(t.type, n)}`).join(', ')}`]),
    );
  }
  const given = inputs as Record<string, unknown>;
  const known = new Set(types.map((t) => t.name));
  const unknown = Object.keys(given).filter((k) => !known.has(k));
  if (unknown.length) {
    throw new DiagnosticError(error(`the model has no input named ${unknown.map((x) => `'${x}'`).join(', ')} (inputs: ${types.map((t) => t.name).join(', ')})`));
  }
  const out: Record<string, Tensor> = {};
  for (const { name, type } of types) {
    // own properties only: an input named 'constructor' is not found on Object.prototype
    const v = Object.hasOwn(given, name) ? given[name] : undefined;
    if (v === undefined) {
      throw new DiagnosticError(error(`input '${name}' ${perMicroBatch(type, n)} was not given: a run takes ${type.dtype}${formatShape(runShape(type, n))}`, undefined, [LAYOUT_NOTE]));
    }
    out[name] = inputTensor(name, v, type, n);
  }
  return out;
}

/** One input's value as a Tensor of its run shape (see RunInput). */
export function inputTensor(name: string, v: unknown, part: TensorType, n: number): Tensor {
  const dtype = part.dtype;
  const shape = runShape(part, n);
  const size = numElements(shape);
  const wrong = (what: string, notes: string[] = []): DiagnosticError =>
    new DiagnosticError(error(`input '${name}': expected ${expectation(part, n)} but got ${what}`, undefined, notes));
  if (v instanceof Tensor) {
    if (v.dtype !== dtype || !shapesEqual(v.shape, shape)) throw wrong(`${v.dtype}${formatShape(v.shape)}`, [LAYOUT_NOTE]);
    return v;
  }
  if (ArrayBuffer.isView(v)) {
    const hint = `a ${dtype} input takes a ${TYPED_ARRAY[dtype]}${dtype === 'float16' ? ' of IEEE half bits' : ''}, an array of numbers or a Tensor`;
    if (viewKind(v) !== TYPED_ARRAY[dtype]) throw wrong(describe(v), [hint]);
    const a = v as InputArray;
    if (a.length !== size) throw wrong(`${describe(v)}`, [`a typed array holds the ${size} elements in row-major order`, LAYOUT_NOTE]);
    // a copy: the caller may reuse its array while an asynchronous run is under way
    if (dtype === 'float16') return new Tensor(dtype, shape, Float32Array.from(a, halfBitsToFloat));
    if (dtype === 'bool') {
      const bad = a.findIndex((x) => x !== 0 && x !== 1);
      if (bad >= 0) throw wrong(`${a[bad]} at position ${bad} of a Uint8Array`, ['bool elements are 0 or 1']);
    }
    const t = Tensor.zeros(dtype, shape);
    if (isNarrowInt(dtype) || isLowFloat(dtype)) for (let i = 0; i < size; i++) t.data[i] = element(a[i], dtype, i, wrong);
    else t.data.set(a);
    return t;
  }
  if (Array.isArray(v)) {
    const flat = flatten(name, v, shape, wrong);
    const data = Tensor.zeros(dtype, shape).data;
    for (let i = 0; i < size; i++) data[i] = element(flat[i], dtype, i, wrong);
    return new Tensor(dtype, shape, data);
  }
  throw wrong(describe(v), [`a ${dtype} input takes a Tensor, a ${TYPED_ARRAY[dtype]} or an array of numbers`]);
}

/**
 * The elements of a flat array (any length check aside) or of a nested array, which must have
 * exactly the run shape: a ragged or misshapen array names the first index that does not fit.
 */
function flatten(name: string, v: readonly unknown[], shape: readonly number[], wrong: (what: string, notes?: string[]) => DiagnosticError): unknown[] {
  const size = numElements(shape);
  if (!v.some((x) => Array.isArray(x))) {
    if (v.length !== size) throw wrong(`an array of ${v.length} elements`, [`a flat array holds the ${size} elements in row-major order; a nested one has the shape ${formatShape(shape)}`, LAYOUT_NOTE]);
    return v as unknown[];
  }
  const out: unknown[] = [];
  const walk = (x: unknown, depth: number, at: string): void => {
    if (depth === shape.length) {
      if (Array.isArray(x)) throw wrong(`a nested array deeper than ${formatShape(shape)} (at ${name}${at})`);
      out.push(x);
      return;
    }
    if (!Array.isArray(x) || x.length !== shape[depth]) {
      throw wrong(`a nested array whose ${name}${at} ${Array.isArray(x) ? `has ${x.length} elements, not ${shape[depth]}` : `is ${describe(x)}, not an array of ${shape[depth]}`}`, [LAYOUT_NOTE]);
    }
    // a loop rather than forEach, which skips the holes of a sparse array
    for (let i = 0; i < x.length; i++) walk(x[i], depth + 1, `${at}[${i}]`);
  };
  walk(v, 0, '');
  return out;
}

/** An element as a message shows it. */
function show(x: unknown): string {
  switch (typeof x) {
    case 'string':
      return JSON.stringify(x);
    case 'bigint':
      return `the bigint ${x}n`;
    case 'object':
    case 'function':
      return describe(x);
    default:
      return String(x);
  }
}


/** An array element as the value the tensor stores; anything that would change on the way is refused. */
function element(x: unknown, dtype: DType, i: number, wrong: (what: string, notes?: string[]) => DiagnosticError): number {
  if (dtype === 'bool') {
    if (x === true || x === 1) return 1;
    if (x === false || x === 0) return 0;
    throw wrong(`${show(x)} at position ${i}`, ['bool elements are true, false, 0 or 1']);
  }
  if (typeof x !== 'number') throw wrong(`${show(x)} at position ${i}`, ['the elements must be numbers']);
  const range = isInteger(dtype) ? integerRange(dtype) : undefined;
  if (range && !(Number.isInteger(x) && x >= range[0] && x <= range[1])) {
    throw wrong(`${x} at position ${i}`, [`${dtype} elements are integers from ${range[0]} to ${range[1]}`]);
  }
  // floats round to nearest as the device stores them (as Tensor.from does)
  return castScalar(dtype, x);
}

/** A class-index input of a loss: its name, the number of classes and the loss's ignore_index. */
export interface LabelCheck {
  readonly input: string;
  readonly classes: number;
  readonly ignore?: number;
}

/** The inputs fed straight to nll_loss / cross_entropy as class indices. */
export function labelChecksOf(model: Graph): LabelCheck[] {
  const out: LabelCheck[] = [];
  for (const op of model.ops) {
    if (op.kind !== 'nll_loss' && op.kind !== 'cross_entropy') continue;
    const target = op.operands[1]!.producer;
    if (target.kind !== 'input') continue;
    const shape = op.operands[0]!.type.shape;
    const ignore = op.attrs['ignore_index'] as number | undefined;
    out.push({ input: target.attrs['name'] as string, classes: shape.length === 1 ? shape[0]! : shape[1]!, ...(ignore !== undefined ? { ignore } : {}) });
  }
  return out;
}

/**
 * Class indices fed to nll_loss / cross_entropy must name a class (or be the ignore_index): the
 * compiled loss selects by equality and would silently skip a bad label, so labels that come
 * straight from an input are checked on the host, with the position of the first bad one.
 */
export function checkLabels(checks: readonly LabelCheck[], inputs: Readonly<Record<string, Tensor>>): void {
  for (const c of checks) {
    const t = inputs[c.input];
    if (!t) continue;
    for (let i = 0; i < t.size; i++) {
      const v = t.data[i]!;
      if ((v < 0 || v >= c.classes) && v !== c.ignore) {
        throw new DiagnosticError(
          error(`input '${c.input}': label ${v} at position ${i} is not a class index in [0, ${c.classes})${c.ignore !== undefined ? ` nor the ignore_index ${c.ignore}` : ''}`),
        );
      }
    }
  }
}

/**
 * Whether a run goes without inputs: none given (or `{}`) with synthetic data, where the device
 * makes them. None given without synthetic data is an error saying what the model takes.
 */
export function noInputs(inputs: unknown, synthetic: boolean, types: readonly { name: string }[]): boolean {
  const none = inputs === undefined || (inputs !== null && typeof inputs === 'object' && Object.getPrototypeOf(inputs) === Object.prototype && Object.keys(inputs).length === 0);
  if (synthetic) return none;
  if (inputs === undefined) {
    throw new DiagnosticError(error('run: no inputs were given', undefined, [`the model takes ${types.map((i) => `'${i.name}'`).join(', ')}`, 'or enable synthetic data (Options.enableSyntheticData(true)) to run on data made on the device']));
  }
  return false;
}
