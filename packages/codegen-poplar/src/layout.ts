import { Module, Op, isFloat, kernels, numElements } from '@tilegraph/ir';
import { multiConvGroups } from './lower/multiconv.js';

/** The geometry of a convolution (any number of spatial dimensions), as poplin::ConvParams takes it. */
export interface ConvGeometry {
  readonly N: number;
  /** Spatial sizes of the input. */
  readonly field: readonly number[];
  readonly M: number;
  readonly Cg: number;
  readonly kernel: readonly number[];
  readonly G: number;
  readonly strides: readonly number[];
  /** all begins, then all ends */
  readonly pads: readonly number[];
  readonly dilations: readonly number[];
}

/**
 * A state or input tensor made by PopLibs in the layout of the operation that first reads it:
 * poplin::createMatMulInputLHS/RHS for a 2-D matmul, poplin::createInput/createWeights for a
 * convolution. `createdShape` is the shape the creation function returns.
 */
export type PlannedOperand = (
  | { readonly op: 'matmul'; readonly role: 'lhs' | 'rhs'; readonly aShape: readonly number[]; readonly bShape: readonly number[]; readonly createdShape: readonly number[] }
  | {
      readonly op: 'conv';
      readonly role: 'input' | 'weights';
      readonly conv: ConvGeometry;
      readonly createdShape: readonly number[];
      /** The convolutions of the reader's multi-convolution, if it is part of one. */
      readonly multiConv?: readonly Op[];
    }
) & {
  /** The operation it is laid out for (it is created with that operation's option flags). */
  readonly reader: Op;
};

/** The layouts a PlannedOperand can be in (poplar-host's PlannedLayout). */
export type PlannedLayout = PlannedOperand['op'];

/** The key of a state (`st:name`) or input (`in:name`) tensor read by `op`'s operand `i`, if it is one. */
export function sourceKey(op: Op): string | undefined {
  if (op.kind === 'input') return `in:${op.attrs['name'] as string}`;
  if (op.kind === 'parameter' || op.kind === 'variable') return `st:${op.attrs['name'] as string}`;
  return undefined;
}

/** A convolution's geometry from the input and weight shapes and its attributes (defaults resolved). */
export function convGeometryOf(xShape: readonly number[], wShape: readonly number[], attrs: Op['attrs']): ConvGeometry {
  const field = xShape.slice(2);
  const rank = field.length;
  return {
    N: xShape[0]!,
    field,
    M: wShape[0]!,
    Cg: wShape[1]!,
    kernel: wShape.slice(2),
    G: attrs['groups'] as number,
    strides: kernels.spatialAttr('strides', attrs['strides'] as number[], rank, 1),
    pads: kernels.spatialPads(attrs['pads'] as number[], rank),
    dilations: kernels.spatialAttr('dilations', attrs['dilations'] as number[], rank, 1),
  };
}

/** A convolution's geometry from its operands and attributes. */
export function convGeometry(op: Op): ConvGeometry {
  return convGeometryOf(op.operands[0]!.type.shape, op.operands[1]!.type.shape, op.attrs);
}

/**
 * The layout a Poplar programmer gives a weight or an input whose first reader is a 2-D matmul
 * (or the pieces of a serialised one) or a convolution: the one PopLibs plans for it, so that the
 * operation reads it, or a slice of it, where it lies instead of rearranging a copy. Keys as
 * `sourceKey`.
 */
export function plannedOperands(m: Module): Map<string, PlannedOperand> {
  const decided = new Set<string>();
  const out = new Map<string, PlannedOperand>();
  for (const g of m.graphs.values()) {
    const groups = multiConvGroups(g);
    for (const op of g.topologicalOrder() ?? g.ops) {
      op.operands.forEach((v, i) => {
        const key = sourceKey(v.producer);
        if (!key || decided.has(key)) return;
        decided.add(key);
        if (v.type.shape.includes(0) || !isFloat(v.type.dtype)) return;
        if (op.kind === 'convolution' && i <= 1) {
          const [x, w] = op.operands;
          if (x!.type.dtype !== w!.type.dtype) return;
          const c = convGeometry(op);
          const group = op.annotations.multiConv ? { multiConv: groups.get(op.annotations.multiConv.group) ?? [op] } : {};
          out.set(key, i === 0 ? { op: 'conv', role: 'input', conv: c, createdShape: [...v.type.shape], reader: op, ...group } : { op: 'conv', role: 'weights', conv: c, createdShape: [c.G, c.M / c.G, c.Cg, ...c.kernel], reader: op, ...group });
          return;
        }
        // read directly, or sliced into the pieces of a serialised matmul
        const use = op.kind === 'slice' ? op.result.uses[0] : { op, index: i };
        if (!use || use.op.kind !== 'matmul' || use.index > 1) return;
        const [a, b] = use.op.operands;
        // a batched left operand times a 2-D right one is one product of all its rows (lower/matmul.ts)
        const aRank = a?.type.shape.length ?? 0;
        if (!a || !b || b.type.shape.length !== 2 || v.type.shape.length !== 2) return;
        if (aRank !== 2 && !(use.index === 1 && aRank > 2)) return;
        if (a.type.dtype !== b.type.dtype) return;
        const [r, c] = v.type.shape as [number, number];
        const aRows = numElements(a.type.shape) / r;
        out.set(
          key,
          use.index === 0
            ? { op: 'matmul', role: 'lhs', aShape: [r, c], bShape: [c, b.type.shape[1]!], createdShape: [r, c], reader: use.op }
            : { op: 'matmul', role: 'rhs', aShape: [aRows, r], bShape: [r, c], createdShape: [r, c], reader: use.op },
        );
      });
    }
  }
  return out;
}
