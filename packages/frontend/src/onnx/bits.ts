import { Value, isFloat } from '@tilegraph/ir';
import { NodeContext } from './context.js';
import { ONNX_DTYPE as T } from './proto.js';
import { irDTypeOf } from './tensor.js';

/**
 * Ops on the bits of values. The IR holds int8/int16/uint8/uint16 widened in int32, so their
 * bit patterns are cut back to their own width here.
 */

/** Bytes of each ONNX type whose bits these ops can handle. */
const WIDTH: Readonly<Record<number, number>> = {
  [T.BOOL]: 1, [T.UINT8]: 1, [T.INT8]: 1, [T.UINT16]: 2, [T.INT16]: 2, [T.FLOAT]: 4, [T.INT32]: 4, [T.UINT32]: 4,
};

/** An int32 value's low `bytes` bytes read as an unsigned or signed integer of that width. */
function narrow(c: NodeContext, x: Value, bytes: number, signed: boolean): Value {
  const e = c.e;
  const mask = bytes === 1 ? 0xff : 0xffff;
  const low = e.op('bitwise_and', [x, e.like(x, mask)]);
  if (!signed) return low;
  const sign = bytes === 1 ? 0x80 : 0x8000;
  return e.sub(e.op('bitwise_xor', [low, e.like(low, sign)]), e.like(low, sign));
}

/** ~x, cut back to the width of uint8 and uint16. */
export function bitwiseNot(c: NodeContext): Value {
  const x = c.input(0);
  if (isFloat(x.type.dtype) || x.type.dtype === 'bool') c.fail(`needs integer inputs, got ${x.type.dtype}`);
  const y = c.e.op('bitwise_not', [x]);
  const t = c.onnxType(0);
  return t === T.UINT8 || t === T.UINT16 ? narrow(c, y, t === T.UINT8 ? 1 : 2, false) : y;
}

/** BitCast-26: the bits of each element read as another type of the same width. */
export function bitCast(c: NodeContext): Value {
  const e = c.e;
  const x = c.input(0);
  const from = c.onnxType(0);
  const to = c.int('to');
  const [wf, wt] = [WIDTH[from], WIDTH[to]];
  if (wf === undefined || wt === undefined) {
    c.unsupported(`reinterprets ONNX type ${from} as ${to}: only bool and 8-, 16- (integer) and 32-bit types are held with their bits (64-bit types are narrowed, float16 bits are not addressable)`);
  }
  if (wf !== wt) c.fail(`the types have different widths (${wf} and ${wt} bytes)`);
  const target = irDTypeOf(to)!;
  let y: Value;
  if (from === to) y = x;
  else if (wf === 4) y = e.op('bitcast', [x], { to: target });
  else if (from === T.BOOL || to === T.BOOL) y = e.cast(x, target);
  else y = narrow(c, e.cast(x, 'int32'), wf, to === T.INT8 || to === T.INT16);
  c.setOnnxType(y, to);
  return y;
}
