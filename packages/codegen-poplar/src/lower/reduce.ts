import { DType, Op, Value, integerRange, isFloat, isInteger, isNarrowInt, normalizeAxis, numElements } from '@tilegraph/ir';
import { GraphEmitter, shapeLiteral } from '../context.js';
import { deviceType, elementLiteral } from '../types.js';
import { EwNode, emitElementwise, emitMap, widenToInt32 } from './elementwise.js';
import { resolveAxes } from './square-sums.js';
import { ReduceOperation, checkReduce, fillValueType, precondition } from './preconditions.js';
import type { Lowering } from './index.js';

/**
 * Reductions → popops::reduce over the reduced dims, in the types PopLibs has reduction vertices
 * for: ADD and MUL of float, half and int; MAX and MIN of those and unsigned; LOGICAL_OR / AND of
 * bool (bool max / min are any / all). Unsigned sums and products reduce the same bits as int
 * (both wrap modulo 2^32); 8- and 16-bit integers reduce widened to int32. A mean divides the float32 sum in a fused vertex. argmax runs in a
 * generated vertex over rows (the reduced axis moved last). A float32 sum or mean of x * x that
 * nothing else reads is a SQUARE_ADD reduction of x (see absorbedSquare).
 */

const REDUCE_OP: Record<string, ReduceOperation> = {
  reduce_sum: 'ADD',
  reduce_mean: 'ADD',
  reduce_prod: 'MUL',
  reduce_max: 'MAX',
  reduce_min: 'MIN',
};

/** Value of a reduction over no elements, as the reference defines it. */
function identityOf(kind: string, t: DType): number {
  switch (kind) {
    case 'reduce_sum':
      return 0;
    case 'reduce_mean':
      return NaN;
    case 'reduce_prod':
      return 1;
    case 'reduce_max':
      return isInteger(t) ? integerRange(t)[0] : t === 'bool' ? 0 : -Infinity;
    default:
      return isInteger(t) ? integerRange(t)[1] : t === 'bool' ? 1 : Infinity;
  }
}

/**
 * Defines `out` as `value` everywhere: popops::fill, or a broadcast constant for bool and the 8- and
 * 16-bit integers (which fill has no instances for).
 */
function emitConstantResult(e: GraphEmitter, out: Value, value: number, ipu: number): void {
  const dtype = out.type.dtype;
  if (dtype === 'bool' || isNarrowInt(dtype)) {
    const c = e.scalarConstant(dtype, value, ipu);
    e.define(out, `broadcastTo(${c}, ${shapeLiteral(out.type.shape)})`, ipu);
    return;
  }
  const t = e.newResult(out, ipu);
  e.emit(`popops::fill<${fillValueType(e, dtype)}>(${e.g(ipu)}, ${t}, prog, ${elementLiteral(dtype, value)}, ${e.debugName('empty_reduction')});`);
}

/**
 * Emits `kind` of `x` over `axes` and defines `out` (of shape out.type.shape, whatever keepdims
 * was). Shared by reduce_* and identity_loss.
 */
export function emitReduction(e: GraphEmitter, kind: string, x: Value, axes: number[], out: Value, ipu: number, squares = false): void {
  const g = e.g(ipu);
  const dtype = x.type.dtype;
  const inShape = x.type.shape;
  const outShape = out.type.shape;
  const count = axes.reduce((n, a) => n * inShape[a]!, 1);
  if (kind === 'reduce_mean' && !isFloat(dtype)) precondition(e, `a mean of ${dtype} values (the mean is defined for float and half)`);
  if (numElements(outShape) === 0) {
    e.newResult(out, ipu);
    return;
  }
  if (count === 0) {
    emitConstantResult(e, out, identityOf(kind, dtype), ipu);
    return;
  }
  const xin = e.tensor(x, ipu);
  if (axes.length === 0) {
    e.define(out, `${xin}.reshape(${shapeLiteral(outShape)})`, ipu, e.ref(x).roots);
    return;
  }
  const dims = `{${axes.join(', ')}}`;
  const name = e.debugName(e.valueLabel(out));
  let op = squares ? 'SQUARE_ADD' : REDUCE_OP[kind]!;
  if (dtype === 'bool') {
    if (op !== 'MAX' && op !== 'MIN') precondition(e, `a ${kind} of bool values (cast to a numeric type first)`);
    op = op === 'MAX' ? 'LOGICAL_OR' : 'LOGICAL_AND';
  }
  if (kind !== 'reduce_mean' && isNarrowInt(dtype)) {
    // PopLibs reduces no 8- or 16-bit integers: the operand widened to int32 is reduced and the
    // result wrapped to the width (sums and products keep their low bits; max and min are exact)
    checkReduce(e, op, 'int32', 'int32');
    const label = e.valueLabel(out);
    const wide = widenToInt32(e, xin, dtype, inShape, ipu, `${label}/int32`);
    e.countResult('int32', outShape, ipu, `${label}/int32_result`);
    const r = e.local('r');
    e.defineOwned(r, `popops::reduce(${g}, ${wide}, poplar::INT, ${dims}, popops::ReduceParams(popops::Operation::${op}), prog, ${name}).reshape(${shapeLiteral(outShape)})`, ipu);
    emitMap(e, 'cast', dtype, outShape, ipu, [{ dtype: 'int32', shape: outShape, tensor: () => r }], e.newResult(out, ipu), 'reduce_wrap');
    return;
  }
  if (kind !== 'reduce_mean') {
    // unsigned sums and products: the same bits reduced as int (PopLibs has no unsigned ADD or MUL)
    const asInt = dtype === 'uint32' && (op === 'ADD' || op === 'MUL');
    const reduceType: DType = asInt ? 'int32' : dtype;
    checkReduce(e, op, reduceType, reduceType);
    const input = asInt ? `${xin}.reinterpret(poplar::INT)` : xin;
    const back = asInt ? '.reinterpret(poplar::UNSIGNED_INT)' : '';
    e.countResult(dtype, outShape, ipu, e.valueLabel(out));
    e.define(out, `popops::reduce(${g}, ${input}, ${deviceType(reduceType).poplar}, ${dims}, popops::ReduceParams(popops::Operation::${op}), prog, ${name}).reshape(${shapeLiteral(outShape)})${back}`, ipu, new Set(), true);
    return;
  }
  // mean: the sum in float32, divided by the count, stored in the result's dtype
  const sum = e.local('r');
  const sumType: DType = 'float32';
  checkReduce(e, op, dtype, sumType);
  e.countResult(sumType, outShape, ipu, 'sum');
  e.emit(`poplar::Tensor ${sum} = popops::reduce(${g}, ${xin}, ${deviceType(sumType).poplar}, ${dims}, popops::ReduceParams(popops::Operation::${op}), prog, ${name}).reshape(${shapeLiteral(outShape)});`);
  const t = e.newResult(out, ipu);
  const nodes: EwNode[] = [{ kind: 'div', dtype: sumType, args: [{ input: 0 }, { input: 1 }], attrs: {} }];
  if (sumType !== dtype) nodes.push({ kind: 'cast', dtype, args: [{ node: 0 }], attrs: {} });
  emitElementwise(e, {
    shape: outShape,
    ipu,
    nodes,
    inputs: [
      { dtype: sumType, shape: outShape, tensor: () => sum },
      { dtype: sumType, shape: [], constant: count },
    ],
    outputs: [{ node: nodes.length - 1, tensor: t }],
    label: 'mean',
  });
}

function lowerReduce(op: Op, e: GraphEmitter): void {
  const x = op.operands[0]!;
  const axes = resolveAxes(op.attrs['axes'] as number[], x.type.shape.length);
  const squared = e.squaredOperand(x);
  if (squared) emitReduction(e, op.kind, squared, axes, op.result, e.ipuOf(op), true);
  else emitReduction(e, op.kind, x, axes, op.result, e.ipuOf(op));
}

function lowerArgmax(op: Op, e: GraphEmitter): void {
  const x = op.operands[0]!;
  const ipu = e.ipuOf(op);
  const g = e.g(ipu);
  const shape = x.type.shape;
  const out = op.result;
  if (shape.length === 0) {
    const t = e.newResult(out, ipu);
    e.emit(`popops::zero(${g}, ${t}, prog, ${e.debugName('argmax')});`);
    return;
  }
  const axis = normalizeAxis(op.attrs['axis'] as number, shape.length);
  const len = shape[axis]!;
  const rows = numElements(shape) / Math.max(len, 1);
  const t = e.newResult(out, ipu);
  if (rows === 0 || numElements(out.type.shape) === 0) return;
  const dtype = x.type.dtype;
  const floatLike = isFloat(dtype);
  const selectLast = op.attrs['select_last_index'] as boolean;
  // NaN is the maximum; ties go to the first index (or the last with select_last_index)
  const body = (name: string) =>
    [
      'template <typename T>',
      `class ${name} : public poplar::MultiVertex {`,
      'public:',
      '  poplar::Input<poplar::Vector<T>> in;',
      '  poplar::Output<poplar::Vector<int>> out;',
      '',
      '  bool compute(unsigned workerId) {',
      `    const unsigned len = ${len};`,
      `    const bool selectLast = ${selectLast};`,
      '    for (unsigned r = workerId; r < out.size(); r += numWorkers()) {',
      '      unsigned best = 0;',
      `      ${floatLike ? 'float bv = float(in[r * len]);' : 'T bv = in[r * len];'}`,
      '      for (unsigned j = 1; j < len; ++j) {',
      `        ${floatLike ? 'const float v = float(in[r * len + j]);' : 'const T v = in[r * len + j];'}`,
      ...(floatLike
        ? [
            '        if (bv != bv) {',
            '          if (selectLast && v != v) best = j;',
            '          continue;',
            '        }',
            '        if (v != v || v > bv || (selectLast && v == bv)) {',
          ]
        : ['        if (v > bv || (selectLast && v == bv)) {']),
      '          best = j;',
      '          bv = v;',
      '        }',
      '      }',
      '      out[r] = int(best);',
      '    }',
      '    return true;',
      '  }',
      '};',
    ].join('\n');
  const cls = e.mc.codelets.add(floatLike ? 'ArgMax' : 'ArgMaxInt', `${len},${selectLast}`, body, floatLike ? ['float', 'half'] : []);
  const vertex = e.mc.codelets.vertexName(cls, deviceType(dtype).device);
  const perm = [...shape.keys()].filter((d) => d !== axis).concat([axis]);
  const rowsView = e.local('f');
  const fo = e.local('f');
  e.emit(`poplar::Tensor ${rowsView} = ${e.operand(op, 0)}.dimShuffle({${perm.join(', ')}}).reshape({${rows}, ${len}});`);
  e.emit(`poplar::Tensor ${fo} = ${t}.flatten();`);
  const cs = e.computeSet('argmax', [e.bufferNamed(t)]);
  e.emit(`forEachRegion(${g}, ${fo}, [&](unsigned tile, std::size_t b, std::size_t e) {`);
  e.emit(`  poplar::VertexRef v = ${g}.addVertex(${cs}, "${vertex}", {{"in", ${rowsView}.slice(b, e).flatten()}, {"out", ${fo}.slice(b, e)}});`);
  e.emit(`  ${g}.setTileMapping(v, tile);`);
  e.emit(`  setCycles(${g}, v, e - b, ${2 * len});`);
  e.emit('});');
  e.execute(cs);
}

export const REDUCE_LOWERINGS: Record<string, Lowering> = {
  reduce_sum: lowerReduce,
  reduce_mean: lowerReduce,
  reduce_max: lowerReduce,
  reduce_min: lowerReduce,
  reduce_prod: lowerReduce,
  argmax: lowerArgmax,
};
