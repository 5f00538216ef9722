/**
 * Helpers for tests of op kernels: run one op as the interpreter does (attributes completed, types
 * inferred first), check that the kernel's results have the inferred types, and make small tensors.
 */
import { AttrInput, GraphBuilder } from '../builder.js';
import { DiagnosticError } from '../diagnostics.js';
import { completeAttrs, inferOp } from '../graph.js';
import { KernelContext } from '../opdef.js';
import { getOpDef } from '../registry.js';
import { Shape, TensorType, formatType } from '../shape.js';
import { Tensor } from '../tensor.js';

/** Seed 0, step 0, printing nowhere. */
export const KERNEL_CTX: KernelContext = { seed: 0, step: 0, print: () => {} };

/**
 * Runs op `name` on these inputs and returns all its results. Throws when the kernel's results
 * differ in dtype or shape from what inference predicts, so every kernel test also tests `infer`.
 */
export function runOp(name: string, inputs: Tensor | readonly Tensor[], attrs: AttrInput = {}, ctx: KernelContext = KERNEL_CTX): Tensor[] {
  const def = getOpDef(name);
  if (!def) throw new Error(`no op named '${name}'`);
  const xs = inputs instanceof Tensor ? [inputs] : inputs;
  const full = completeAttrs(def, attrs);
  const inferred = inferOp(def, xs, full).map(formatType).join(', ');
  const outs = def.kernel(xs, full, ctx);
  const got = outs.map(formatType).join(', ');
  if (got !== inferred) throw new Error(`${name}: the kernel gave (${got}) but inference predicts (${inferred})`);
  return outs;
}

/** The first result of `runOp`. */
export function runOp1(name: string, inputs: Tensor | readonly Tensor[], attrs: AttrInput = {}, ctx: KernelContext = KERNEL_CTX): Tensor {
  return runOp(name, inputs, attrs, ctx)[0]!;
}

export const f32 = (shape: Shape, values: readonly number[]): Tensor => Tensor.from('float32', shape, values);
export const i32 = (shape: Shape, values: readonly number[]): Tensor => Tensor.from('int32', shape, values);

/** from, from + 1, ..., n values. */
export const iota = (n: number, from = 0): number[] => Array.from({ length: n }, (_, i) => i + from);

/**
 * The message of the first diagnostic that building op `kind` on inputs of these types reports;
 * throws when the op builds, or fails with anything other than a DiagnosticError.
 */
export function buildError(kind: string, operands: readonly TensorType[], attrs: AttrInput = {}): string {
  const b = new GraphBuilder();
  const xs = operands.map((t, i) => b.input(`x${i}`, t.dtype, t.shape));
  try {
    b.op(kind, xs, attrs);
  } catch (e) {
    if (!(e instanceof DiagnosticError)) throw e;
    return e.diagnostics[0]!.message;
  }
  throw new Error(`${kind} was built without an error`);
}
