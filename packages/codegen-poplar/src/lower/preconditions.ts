import { DType, DiagnosticError, error, formatShape } from '@tilegraph/ir';
import type { GraphEmitter } from '../context.js';
import type { ConvGeometry } from '../layout.js';

/**
 * PopLibs' documented preconditions (the public headers, and the vertex types its libraries are
 * built with) checked before a call is emitted, so that a model PopLibs would reject at graph
 * construction on the IPU gets a diagnostic naming the op and its source line instead.
 * Sources: graphcore/poplibs sdk-release-3.4, include/popops/*.hpp and lib/popops (Reduce.cpp,
 * DynamicSlice.cpp, Fill.cpp and the codelets' explicit instantiations).
 */

/** Reports a violated precondition of a PopLibs call made for the op being lowered. */
export function precondition(e: GraphEmitter, message: string): never {
  const op = e.current;
  throw new DiagnosticError(error(`${op ? `${op.kind}: ` : ''}${message}`, op?.loc, ['PopLibs would reject this call when the program builds its graph on the IPU']));
}

export type ReduceOperation = 'ADD' | 'SQUARE_ADD' | 'MUL' | 'MAX' | 'MIN' | 'LOGICAL_AND' | 'LOGICAL_OR';

const FLOATS: readonly DType[] = ['float32', 'float16'];
/** Sums and products: float and half to either, and int. */
const ARITHMETIC_REDUCE: readonly (readonly [DType, DType])[] = [...FLOATS.flatMap((a) => FLOATS.map((b) => [a, b] as const)), ['int32', 'int32']];

/** popops::reduce: the (input, output) types its reduction vertices are instantiated for. */
const REDUCE_TYPES: Readonly<Record<ReduceOperation, readonly (readonly [DType, DType])[]>> = {
  ADD: ARITHMETIC_REDUCE,
  SQUARE_ADD: ARITHMETIC_REDUCE,
  MUL: ARITHMETIC_REDUCE,
  MAX: [['float32', 'float32'], ['float16', 'float16'], ['int32', 'int32'], ['uint32', 'uint32']],
  MIN: [['float32', 'float32'], ['float16', 'float16'], ['int32', 'int32'], ['uint32', 'uint32']],
  LOGICAL_AND: [['bool', 'bool']],
  LOGICAL_OR: [['bool', 'bool']],
};

export function checkReduce(e: GraphEmitter, operation: ReduceOperation, input: DType, output: DType): void {
  if (!REDUCE_TYPES[operation].some(([a, b]) => a === input && b === output)) {
    const ok = REDUCE_TYPES[operation].map(([a, b]) => (a === b ? a : `${a} -> ${b}`)).join(', ');
    precondition(e, `popops::reduce has no ${operation} reduction of ${input} to ${output} (it has ${ok})`);
  }
}

/**
 * popops::fill<T>: the libraries define T = float, int and unsigned (and 64-bit types the
 * generator does not use), and the value's type must suit the tensor's element type.
 */
const FILL_VALUE: Partial<Record<DType, string>> = { float32: 'float', float16: 'float', int32: 'int', uint32: 'unsigned' };

/** The C++ type of a popops::fill value for a tensor of `dtype`. */
export function fillValueType(e: GraphEmitter, dtype: DType): string {
  const t = FILL_VALUE[dtype];
  if (!t) precondition(e, `popops::fill has no instance for a ${dtype} tensor (the libraries define fill<float>, fill<int> and fill<unsigned>)`);
  return t;
}

/**
 * Element types of PopLibs' slice and update vertices (DynamicSlice*, MultiSlice, MultiUpdate):
 * the 8-bit integers (signed char, unsigned char) have them, the 16-bit ones do not.
 */
const SLICE_TYPES: readonly DType[] = ['float32', 'float16', 'int32', 'uint32', 'bool', 'int8', 'uint8'];
/** popops::multiUpdateAdd: ScaledMultiUpdateOp<T, ...> is built for half, float, int and unsigned. */
const UPDATE_ADD_TYPES: readonly DType[] = ['float32', 'float16', 'int32', 'uint32'];

function checkDims(e: GraphEmitter, call: string, shape: readonly number[], dims: readonly number[], sizes: readonly number[]): void {
  if (dims.length !== sizes.length) precondition(e, `${call}: dims (${dims.length}) and sizes (${sizes.length}) must be the same size`);
  const seen = new Set<number>();
  dims.forEach((d, i) => {
    if (!Number.isInteger(d) || d < 0 || d >= shape.length) precondition(e, `${call}: invalid dimension ${d} of a ${formatShape(shape)} tensor`);
    if (seen.has(d)) precondition(e, `${call}: dimension ${d} specified multiple times`);
    seen.add(d);
    if (sizes[i]! > shape[d]!) precondition(e, `${call}: a slice of ${sizes[i]} along dimension ${d} is bigger than the tensor ${formatShape(shape)}`);
  });
}

/** popops::dynamicSlice / dynamicUpdate: offset is an unsigned vector with one entry per sliced dim. */
export function checkDynamicSlice(
  e: GraphEmitter,
  call: 'dynamicSlice' | 'dynamicUpdate',
  dtype: DType,
  shape: readonly number[],
  offset: { dtype: DType; shape: readonly number[] },
  dims: readonly number[],
  sizes: readonly number[],
  update?: readonly number[],
): void {
  const name = `popops::${call}`;
  if (!SLICE_TYPES.includes(dtype)) precondition(e, `${name} has no vertices for ${dtype} data`);
  if (offset.dtype !== 'uint32') precondition(e, `${name}: the offset must be unsigned int, not ${offset.dtype}`);
  if (offset.shape.length !== 1 || offset.shape[0] !== dims.length) precondition(e, `${name}: the offset ${formatShape(offset.shape)} must have one element per sliced dimension (${dims.length})`);
  checkDims(e, name, shape, dims, sizes);
  if (update) {
    const want = shape.map((d, i) => (dims.includes(i) ? sizes[dims.indexOf(i)]! : d));
    if (update.join() !== want.join()) precondition(e, `${name}: the update ${formatShape(update)} must have the tensor's shape with the slice sizes, ${formatShape(want)}`);
  }
}

/** popops::multiSlice with tensor offsets: offsets [n, 1], one dimension of size 1 sliced. */
export function checkMultiSlice(e: GraphEmitter, dtype: DType, shape: readonly number[], offsets: readonly number[], dims: readonly number[], sizes: readonly number[]): void {
  if (!SLICE_TYPES.includes(dtype)) precondition(e, `popops::multiSlice has no vertices for ${dtype} data`);
  if (dims.length !== 1 || sizes.length !== 1) precondition(e, 'popops::multiSlice: dims and sizes must have one element');
  if (offsets.length !== 2 || offsets[1] !== 1) precondition(e, `popops::multiSlice: offsets ${formatShape(offsets)} must be [numOffsets, 1]`);
  checkDims(e, 'popops::multiSlice', shape, dims, sizes);
}

/**
 * popops::multiUpdateAdd: t is 2-D [numBaseElements, elemSize], slices [n, 1, elemSize], offsets
 * [n, 1] unsigned, dims = {0} and sizes = {1}, scale a scalar of t's type (or float for half).
 */
export function checkMultiUpdateAdd(
  e: GraphEmitter,
  dtype: DType,
  t: readonly number[],
  slices: readonly number[],
  offsets: readonly number[],
  dims: readonly number[],
  sizes: readonly number[],
  scale: { dtype: DType; shape: readonly number[] },
): void {
  const name = 'popops::multiUpdateAdd';
  if (!UPDATE_ADD_TYPES.includes(dtype)) precondition(e, `${name} has no vertices for ${dtype} data (it has ${UPDATE_ADD_TYPES.join(', ')})`);
  if (t.length !== 2) precondition(e, `${name} needs a 2-D base tensor [numBaseElements, elemSize], got ${formatShape(t)}`);
  if (dims.length !== 1 || sizes.length !== 1 || dims[0] !== 0 || sizes[0] !== 1) precondition(e, `${name}: dims and sizes must be {0} and {1}`);
  if (offsets.length !== 2 || offsets[1] !== 1) precondition(e, `${name}: offsets ${formatShape(offsets)} must be [numOffsets, 1]`);
  if (slices.length !== 3 || slices[0] !== offsets[0] || slices[1] !== 1 || slices[2] !== t[1]) {
    precondition(e, `${name}: slices ${formatShape(slices)} must be [numOffsets, 1, elemSize] = [${offsets[0]}, 1, ${t[1]}]`);
  }
  if (scale.shape.length !== 0) precondition(e, `${name}: the scale must be a scalar, got ${formatShape(scale.shape)}`);
  if (scale.dtype !== dtype && !(dtype === 'float16' && scale.dtype === 'float32')) precondition(e, `${name}: a ${scale.dtype} scale for ${dtype} data (only half data takes a float scale)`);
}

/**
 * poplin::calculateWeightDeltas (poplin/Convolution.hpp): zDeltas are the gradients of the forward
 * convolution's output [N, G·Cout, outField], activations its input [N, G·Cin, field]; one ConvParams
 * type for both (inputType = outputType here), float or half.
 */
export function checkWeightDeltas(
  e: GraphEmitter,
  zDeltas: { dtype: DType; shape: readonly number[] },
  activations: { dtype: DType; shape: readonly number[] },
  c: ConvGeometry,
): void {
  const call = 'poplin::calculateWeightDeltas';
  checkPoplinTypes(e, call, [zDeltas.dtype, activations.dtype]);
  if (zDeltas.dtype !== activations.dtype) precondition(e, `${call}: zDeltas (${zDeltas.dtype}) and activations (${activations.dtype}) must have the convolution's type`);
  const act = [c.N, c.G * c.Cg, ...c.field];
  if (formatShape(activations.shape) !== formatShape(act)) precondition(e, `${call}: activations ${formatShape(activations.shape)} should be ${formatShape(act)}`);
  const rank = c.field.length;
  const out = c.field.map((n, d) => {
    const ext = (c.kernel[d]! - 1) * c.dilations[d]! + 1;
    const padded = n + c.pads[d]! + c.pads[d + rank]!;
    return padded < ext ? -1 : Math.floor((padded - ext) / c.strides[d]!) + 1;
  });
  if (out.some((n) => n < 1)) precondition(e, `${call}: the kernel ${c.kernel.join('x')} does not fit the padded input of ${formatShape(act)}`);
  const z = [c.N, c.M, ...out];
  if (formatShape(zDeltas.shape) !== formatShape(z)) precondition(e, `${call}: zDeltas ${formatShape(zDeltas.shape)} should be ${formatShape(z)}, the forward convolution's output`);
}

/** poplin::matMul / matMulGrouped / convolution: floating-point operands of one type. */
export function checkPoplinTypes(e: GraphEmitter, call: string, types: readonly DType[]): void {
  for (const t of types) if (!FLOATS.includes(t)) precondition(e, `${call} takes float or half operands, not ${t}`);
}
