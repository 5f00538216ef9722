import { DType, Op, Value, broadcastShapes, isFloat, isNarrowInt, numElements } from '@tilegraph/ir';
import { GraphEmitter, shapeLiteral } from '../context.js';
import { deviceType } from '../types.js';
import type { Lowering } from './index.js';
import { checkPoplinTypes } from './preconditions.js';
import { poplinOptions } from './poplin-options.js';
import { fixedVertex } from '../codelets.js';
import { emitMap, widenToInt32 } from './elementwise.js';

/**
 * matmul (numpy.matmul semantics) → poplin::matMul for 2-D products and for a batched left
 * operand times a 2-D right one (its rows folded into one product), poplin::matMulGrouped for
 * other batched ones (batch dims broadcast with views and flattened into the group dim). 1-D
 * operands become a row / a column and the extra dim is dropped again. Integer products (no
 * PopLibs support) run in a generated vertex that wraps modulo 2^32 like the reference; 8- and
 * 16-bit operands are widened to int32 first and the product wrapped back to their width.
 */

function lowerMatmul(op: Op, e: GraphEmitter): void {
  const [av, bv] = op.operands as [import('@tilegraph/ir').Value, import('@tilegraph/ir').Value];
  const a = av.type.shape;
  const b = bv.type.shape;
  const ipu = e.ipuOf(op);
  const g = e.g(ipu);
  const out = op.result;
  const dtype = out.type.dtype;
  const a2 = a.length === 1 ? [1, a[0]!] : [...a];
  const b2 = b.length === 1 ? [b[0]!, 1] : [...b];
  const m = a2[a2.length - 2]!;
  const k = a2[a2.length - 1]!;
  const n = b2[b2.length - 1]!;
  const batch = broadcastShapes(a2.slice(0, -2), b2.slice(0, -2));
  const groups = numElements(batch);
  let A = e.local('a');
  let B = e.local('b');
  e.emit(`poplar::Tensor ${A} = ${e.operand(op, 0)}${a.length === 1 ? `.reshape(${shapeLiteral(a2)})` : ''};`);
  e.emit(`poplar::Tensor ${B} = ${e.operand(op, 1)}${b.length === 1 ? `.reshape(${shapeLiteral(b2)})` : ''};`);
  // narrow integers: the product of the operands widened to int32, wrapped back to the width (the
  // integer vertex's 32-bit stores keep workers apart; the low bits of the sum are the same)
  const narrow = isNarrowInt(dtype) && numElements(out.type.shape) > 0 && k > 0;
  if (narrow) {
    A = widenToInt32(e, A, dtype, a2, ipu, 'matmul_lhs_int32');
    B = widenToInt32(e, B, dtype, b2, ipu, 'matmul_rhs_int32');
  }
  const A3 = `broadcastTo(${A}, ${shapeLiteral([...batch, m, k])}).reshape(${shapeLiteral([groups, m, k])})`;
  const B3 = `broadcastTo(${B}, ${shapeLiteral([...batch, k, n])}).reshape(${shapeLiteral([groups, k, n])})`;
  if (numElements(out.type.shape) === 0) {
    e.newResult(out, ipu);
    return;
  }
  if (k === 0) {
    // an empty sum: zeros (popops::zero has no 16-bit integer instances: a generated vertex writes those)
    const t = e.newResult(out, ipu);
    if (isNarrowInt(dtype)) emitMap(e, 'cast', dtype, out.type.shape, ipu, [{ dtype: 'int32', shape: [], constant: 0 }], t, 'matmul_zero');
    else e.emit(`popops::zero(${g}, ${t}, prog, ${e.debugName('matmul_zero')});`);
    return;
  }
  if (narrow) {
    const wide = e.newTensor('int32', out.type.shape, ipu, `${e.valueLabel(out)}/int32`);
    lowerIntMatmul(e, ipu, 'int32', wide, A3, B3, m, k, n);
    emitMap(e, 'cast', dtype, out.type.shape, ipu, [{ dtype: 'int32', shape: out.type.shape, tensor: () => wide }], e.newResult(out, ipu), 'matmul_wrap');
    return;
  }
  if (!isFloat(dtype)) {
    lowerIntMatmul(e, ipu, dtype, e.newResult(out, ipu), A3, B3, m, k, n);
    return;
  }
  // a batched left operand times one 2-D right operand (a linear layer over a sequence) is one
  // product of all its rows, as PopART lowers it: the right operand is read once, not per group
  const rowsFolded = a2.length > 2 && b2.length === 2;
  const grouped = batch.length > 0 && !rowsFolded;
  checkPoplinTypes(e, grouped ? 'poplin::matMulGrouped' : 'poplin::matMul', [av.type.dtype, bv.type.dtype, dtype]);
  const opts = poplinOptions(op, e);
  const type = deviceType(dtype).poplar;
  const lead = grouped ? [groups] : [];
  const rows = rowsFolded ? groups * m : m;
  // the product and, while it runs, the operands rearranged for the plan and the partial sums
  const label = e.valueLabel(out);
  // an operand made in its matmul's planned layout (or a slice of one) is read where it lies
  const planned = (v: Value, elements: number) => numElements(v.type.shape) === elements && e.inPlannedLayout(v, 'matmul', ipu);
  if (!planned(av, groups * m * k)) e.countTemporary(av.type.dtype, [...lead, rows, k], ipu, `${label}/lhsRearranged`);
  if (!planned(bv, (grouped ? groups : 1) * k * n)) e.countTemporary(bv.type.dtype, [...lead, k, n], ipu, `${label}/rhsRearranged`);
  e.countTemporary(e.mc.partialsType() === 'half' ? 'float16' : 'float32', [...lead, rows, n], ipu, `${label}/partials`);
  e.countResult(dtype, [...lead, rows, n], ipu, label);
  const name = e.debugName(e.valueLabel(out));
  const product = grouped
    ? `poplin::matMulGrouped(${g}, ${A3}, ${B3}, prog, ${type}, ${name}, ${opts})`
    : `poplin::matMul(${g}, ${rowsFolded ? `${A}.reshape(${shapeLiteral([rows, k])})` : A}, ${B}, prog, ${type}, ${name}, ${opts})`;
  e.define(out, `${product}.reshape(${shapeLiteral(out.type.shape)})`, ipu, new Set(), true);
}

/** Integer matmul (32-bit `dtype`) into `t`: one vertex per region of the result, reading the whole operands. */
function lowerIntMatmul(e: GraphEmitter, ipu: number, dtype: DType, t: string, A3: string, B3: string, m: number, k: number, n: number): void {
  const g = e.g(ipu);
  const dt = deviceType(dtype).device;
  const cls = e.mc.codelets.add('MatMulInt', '', fixedVertex('MatMulInt'), []);
  const vertex = e.mc.codelets.vertexName(cls, dt);
  const fa = e.local('f');
  const fb = e.local('f');
  const fo = e.local('f');
  e.emit(`poplar::Tensor ${fa} = ${A3}.flatten();`);
  e.emit(`poplar::Tensor ${fb} = ${B3}.flatten();`);
  e.emit(`poplar::Tensor ${fo} = ${t}.flatten();`);
  const cs = e.computeSet('matmul_int', [e.bufferNamed(t)]);
  e.emit(`forEachRegion(${g}, ${fo}, [&](unsigned tile, std::size_t b, std::size_t e) {`);
  e.emit(`  poplar::VertexRef v = ${g}.addVertex(${cs}, "${vertex}", {{"a", ${fa}}, {"b", ${fb}}, {"out", ${fo}.slice(b, e)}});`);
  e.emit(`  ${g}.setInitialValue(v["begin"], unsigned(b));`);
  for (const [field, value] of [['m', m], ['k', k], ['n', n]] as const) e.emit(`  ${g}.setInitialValue(v["${field}"], ${value}u);`);
  e.emit(`  ${g}.setTileMapping(v, tile);`);
  e.emit(`  setCycles(${g}, v, e - b, ${2 * k});`);
  e.emit('});');
  e.execute(cs);
}

export const MATMUL_LOWERINGS: Record<string, Lowering> = { matmul: lowerMatmul };
