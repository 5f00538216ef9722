import { Op, numElements } from '@tilegraph/ir';
import { GraphEmitter, shapeLiteral } from '../context.js';
import { deviceType } from '../types.js';
import { emitElementwise } from './elementwise.js';
import type { Lowering } from './index.js';
import { checkPoplinTypes } from './preconditions.js';
import { poplinOptions } from './matmul.js';

/**
 * conv2d → poplin::convolution with ConvParams: the weights [M, C/G, kH, kW] are viewed as
 * poplin's [G, M/G, C/G, kH, kW]; pads, dilations and strides go into the input, kernel and
 * output transforms. A bias is added by a fused element-wise vertex.
 */
function lowerConv2d(op: Op, e: GraphEmitter): void {
  const [x, w, bias] = op.operands;
  const ipu = e.ipuOf(op);
  const g = e.g(ipu);
  const out = op.result;
  const [N, , H, W] = x!.type.shape as [number, number, number, number];
  const [M, Cg, KH, KW] = w!.type.shape as [number, number, number, number];
  const G = op.attrs['groups'] as number;
  const strides = op.attrs['strides'] as number[];
  const pads = op.attrs['pads'] as number[];
  const dil = op.attrs['dilations'] as number[];
  const dtype = out.type.dtype;
  if (numElements(out.type.shape) === 0) {
    e.newResult(out, ipu);
    return;
  }
  checkPoplinTypes(e, 'poplin::convolution', [x!.type.dtype, w!.type.dtype]);
  const p = e.local('p');
  e.emit(`poplin::ConvParams ${p}(${deviceType(dtype).poplar}, ${N}, {${H}, ${W}}, {${KH}, ${KW}}, ${Cg}, ${M / G}, ${G});`);
  e.emit(`${p}.inputTransform.paddingLower = {${pads[0]}, ${pads[1]}};`);
  e.emit(`${p}.inputTransform.paddingUpper = {${pads[2]}, ${pads[3]}};`);
  e.emit(`${p}.kernelTransform.dilation = {${dil[0]}, ${dil[1]}};`);
  e.emit(`${p}.outputTransform.stride = {${strides[0]}, ${strides[1]}};`);
  const opts = poplinOptions(op, e);
  const xin = e.operand(op, 0);
  const win = `${e.operand(op, 1)}.reshape(${shapeLiteral([G, M / G, Cg, KH, KW])})`;
  e.countResult(dtype, out.type.shape, ipu, e.valueLabel(out));
  const conv = `poplin::convolution(${g}, ${xin}, ${win}, ${p}, false, prog, ${e.debugName(e.valueLabel(out))}, ${opts})`;
  if (!bias) {
    e.define(out, conv, ipu);
    return;
  }
  const raw = e.local('y');
  e.emit(`poplar::Tensor ${raw} = ${conv};`);
  const t = e.newResult(out, ipu);
  const b = e.operand(op, 2);
  emitElementwise(e, {
    shape: out.type.shape,
    ipu,
    nodes: [{ kind: 'add', dtype, args: [{ input: 0 }, { input: 1 }], attrs: {} }],
    inputs: [
      { dtype, shape: out.type.shape, tensor: () => raw },
      { dtype, shape: [1, M, 1, 1], tensor: () => `${b}.reshape({1, ${M}, 1, 1})` },
    ],
    outputs: [{ node: 0, tensor: t }],
    label: 'conv_bias',
  });
}

export const CONV_LOWERINGS: Record<string, Lowering> = { conv2d: lowerConv2d };
