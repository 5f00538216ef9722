import { AttrValue, DType, Value } from '@tilegraph/ir';
import type { NodeContext } from './context.js';
import { irDTypeOf } from './tensor.js';

/** The IR dtype of an ONNX `to` attribute value (Cast). */
export function castTarget(c: NodeContext, onnxType: number): DType {
  const t = irDTypeOf(onnxType);
  if (!t) c.unsupported(`casts to ONNX data type ${onnxType}, which the IR does not support`);
  return t;
}

/**
 * x cast to `to` with the node's saturate (float8 targets) and round_mode (float8e8m0 target)
 * attributes; on other targets ONNX ignores them, and the importer says so when one asks for
 * something other than the default.
 */
export function castWithAttributes(c: NodeContext, x: Value, to: DType): Value {
  const attrs: Record<string, AttrValue> = { to };
  if (c.has('saturate')) {
    const saturate = c.int('saturate');
    if (saturate !== 0 && saturate !== 1) c.fail(`saturate must be 0 or 1, got ${saturate}`);
    if (to.startsWith('float8')) attrs['saturate'] = saturate === 1;
    else if (saturate === 0) c.warn(`saturate = 0 has no effect: the cast is to ${to}, and saturate applies only to float8 types`);
  }
  if (c.has('round_mode')) {
    const mode = c.string('round_mode');
    if (!['up', 'down', 'nearest'].includes(mode)) c.fail(`round_mode must be 'up', 'down' or 'nearest', got '${mode}'`);
    if (to === 'float8e8m0') attrs['round_mode'] = mode;
    else if (mode !== 'up') c.warn(`round_mode '${mode}' has no effect: the cast is to ${to}, and round_mode applies only to float8e8m0`);
  }
  return x.type.dtype === to ? x : c.e.op('cast', [x], attrs);
}

/** Cast (opset 6 on): `to` is an ONNX type number. */
export function lowerCast(c: NodeContext): Value {
  const x = c.input(0);
  const to = c.int('to');
  let y = castWithAttributes(c, x, castTarget(c, to));
  // a cast between ONNX types held alike (int64 → int32) still makes a value of the new type
  if (y === x && c.onnxType(0) !== to) y = c.e.op('identity', [x]);
  c.setOnnxType(y, to);
  return y;
}

/** CastLike: the target type is that of the second input. */
export function lowerCastLike(c: NodeContext): Value {
  const x = c.input(0);
  const to = c.onnxType(1);
  let y = castWithAttributes(c, x, c.input(1).type.dtype);
  if (y === x && c.onnxType(0) !== to) y = c.e.op('identity', [x]);
  c.setOnnxType(y, to);
  return y;
}
