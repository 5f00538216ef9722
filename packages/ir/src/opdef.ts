import type { AttrSpec, Attrs } from './attributes.js';
import type { Op, Value } from './graph.js';
import type { GraphBuilder } from './builder.js';
import type { TensorType } from './shape.js';
import type { Tensor } from './tensor.js';

export interface OperandSpec {
  readonly name: string;
  /** Takes one or more values (only the last operand may be variadic). */
  readonly variadic?: boolean;
  /** May be left out (only trailing operands may be optional). */
  readonly optional?: boolean;
  /** Whether a gradient flows to this operand. Defaults to true. */
  readonly differentiable?: boolean;
}

/** What a reference kernel may use besides its inputs. */
export interface KernelContext {
  /** The run's random seed (options.randomSeed); random ops mix it with their own seed attribute. */
  readonly seed: number;
  /** Counts calls of the step program so that dropout masks differ between steps. */
  readonly step: number;
  /** Where ipu_print_tensor writes. */
  readonly print: (line: string) => void;
}

/** Arguments of a gradient rule: emit the backward ops into `b` and return one gradient per operand. */
export interface GradContext {
  readonly b: GraphBuilder;
  readonly op: Op;
  readonly inputs: readonly Value[];
  readonly outputs: readonly Value[];
  /** Gradient of the loss with respect to each result; undefined when a result does not reach the loss. */
  readonly outputGrads: readonly (Value | undefined)[];
}
export type GradRule = (ctx: GradContext) => readonly (Value | undefined)[];

/**
 * One op, defined in one place: operands, attributes, inference, reference semantics and
 * differentiation. See DESIGN.md "One place per op".
 */
export interface OpDef {
  readonly name: string;
  /** The file under ops/ and the codegen lowering family it belongs to. */
  readonly family: string;
  readonly doc: string;
  readonly operands: readonly OperandSpec[];
  readonly attrs: Readonly<Record<string, AttrSpec>>;
  /** Source ops (input, parameter, random_*) take their result type from `dtype`/`shape` attributes. */
  readonly typeFromAttrs?: boolean;
  /** Must not be removed even when its results are unused (printing, losses). */
  readonly sideEffects?: boolean;
  /**
   * Result types from operand types and (default-filled) attributes. Throws ShapeError with a
   * message naming the problem and the shapes; the caller adds the op name and location.
   */
  infer(types: readonly TensorType[], attrs: Attrs): TensorType[];
  /** Reference semantics on host tensors: the oracle for everything else. */
  kernel(inputs: readonly Tensor[], attrs: Attrs, ctx: KernelContext): Tensor[];
  /** Gradient rule, or 'none' for ops with no gradient (comparisons, argmax, ...). Filled by autograd work. */
  readonly grad?: GradRule | 'none';
  /** Indices of operands/results the gradient needs kept alive (recomputation uses this). */
  readonly saves?: { readonly operands?: readonly number[]; readonly results?: readonly number[] };
}

/** Identity helper giving op records their type. */
export function defineOp(def: OpDef): OpDef {
  return def;
}

/** Splits a flat operand list into the operand specs (variadic and optional handled). */
export function operandCountOk(def: OpDef, n: number): string | undefined {
  const specs = def.operands;
  const required = specs.filter((s) => !s.optional && !s.variadic).length;
  const variadic = specs.some((s) => s.variadic);
  const max = variadic ? Infinity : specs.length;
  const min = required + (variadic ? 1 : 0);
  if (n < min || n > max) {
    const want = variadic ? `at least ${min}` : min === max ? `${min}` : `${min} to ${max}`;
    return `expects ${want} operand${min === 1 && max === 1 ? '' : 's'}, got ${n}`;
  }
  return undefined;
}

/** Whether operand `i` of an op with this def is differentiable. */
export function operandDifferentiable(def: OpDef, i: number): boolean {
  const specs = def.operands;
  const s = i < specs.length ? specs[i]! : specs[specs.length - 1]!;
  if (i >= specs.length && !s.variadic) return false;
  return s.differentiable ?? true;
}
