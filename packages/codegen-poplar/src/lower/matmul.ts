import { Op, Value, broadcastShapes, isFloat, numElements } from '@tilegraph/ir';
import { GraphEmitter, shapeLiteral } from '../context.js';
import { deviceType } from '../types.js';
import type { Lowering } from './index.js';
import { checkPoplinTypes } from './preconditions.js';
import { poplinOptions } from './poplin-options.js';
import { fixedVertex } from '../codelets.js';

/**
 * matmul (numpy.matmul semantics) → poplin::matMul for 2-D products and poplin::matMulGrouped
 * for batched ones (batch dims broadcast with views and flattened into the group dim). 1-D
 * operands become a row / a column and the extra dim is dropped again. Integer products (no
 * PopLibs support) run in a generated vertex that wraps modulo 2^32 like the reference.
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
  const A = e.local('a');
  const B = e.local('b');
  e.emit(`poplar::Tensor ${A} = ${e.operand(op, 0)}${a.length === 1 ? `.reshape(${shapeLiteral(a2)})` : ''};`);
  e.emit(`poplar::Tensor ${B} = ${e.operand(op, 1)}${b.length === 1 ? `.reshape(${shapeLiteral(b2)})` : ''};`);
  const A3 = `broadcastTo(${A}, ${shapeLiteral([...batch, m, k])}).reshape(${shapeLiteral([groups, m, k])})`;
  const B3 = `broadcastTo(${B}, ${shapeLiteral([...batch, k, n])}).reshape(${shapeLiteral([groups, k, n])})`;
  if (numElements(out.type.shape) === 0) {
    e.newResult(out, ipu);
    return;
  }
  if (k === 0) {
    // an empty sum: zeros
    const t = e.newResult(out, ipu);
    e.emit(`popops::zero(${g}, ${t}, prog, ${e.debugName('matmul_zero')});`);
    return;
  }
  if (!isFloat(dtype)) {
    lowerIntMatmul(op, e, A3, B3, m, k, n);
    return;
  }
  checkPoplinTypes(e, batch.length > 0 ? 'poplin::matMulGrouped' : 'poplin::matMul', [av.type.dtype, bv.type.dtype, dtype]);
  const opts = poplinOptions(op, e);
  const type = deviceType(dtype).poplar;
  // the product and, while it runs, the operands rearranged for the plan and the partial sums
  const grouped = batch.length > 0;
  const lead = grouped ? [groups] : [];
  const label = e.valueLabel(out);
  // an operand made in its matmul's planned layout (or a slice of one) is read where it lies
  const planned = (v: Value, elements: number) => numElements(v.type.shape) === elements && e.inPlannedLayout(v, 'matmul', ipu);
  if (!planned(av, groups * m * k)) e.countTemporary(av.type.dtype, [...lead, m, k], ipu, `${label}/lhsRearranged`);
  if (!planned(bv, groups * k * n)) e.countTemporary(bv.type.dtype, [...lead, k, n], ipu, `${label}/rhsRearranged`);
  e.countTemporary(e.mc.partialsType() === 'half' ? 'float16' : 'float32', [...lead, m, n], ipu, `${label}/partials`);
  e.countResult(dtype, [...lead, m, n], ipu, label);
  const name = e.debugName(e.valueLabel(out));
  const product =
    !grouped
      ? `poplin::matMul(${g}, ${A}, ${B}, prog, ${type}, ${name}, ${opts})`
      : `poplin::matMulGrouped(${g}, ${A3}, ${B3}, prog, ${type}, ${name}, ${opts})`;
  e.define(out, `${product}.reshape(${shapeLiteral(out.type.shape)})`, ipu, new Set(), true);
}

/** Integer matmul: one vertex per region of the result, reading the whole operands. */
function lowerIntMatmul(op: Op, e: GraphEmitter, A3: string, B3: string, m: number, k: number, n: number): void {
  const ipu = e.ipuOf(op);
  const g = e.g(ipu);
  const dt = deviceType(op.result.type.dtype).device;
  const cls = e.mc.codelets.add('MatMulInt', '', fixedVertex('MatMulInt'), []);
  const vertex = e.mc.codelets.vertexName(cls, dt);
  const t = e.newResult(op.result, ipu);
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
