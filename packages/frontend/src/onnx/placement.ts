import { Annotations } from '@tilegraph/ir';
import type { NodeContext } from './context.js';
import { ATTR_TYPE, AttributeProto, bytesToString, int64 } from './proto.js';

/**
 * PopART's Builder writes these integer node attributes to place a node: virtualGraph (the IPU),
 * pipelineStage and executionPhase. The importer gives them to every op the node lowers to, as the
 * op's `ipu`, `stage` and `phase` annotations, which the placement passes read. Any op type may
 * carry them (they are never an unknown attribute); the node's block is not set.
 */
export const IPU_ATTR = '__ipu_number';
export const STAGE_ATTR = '__pipeline_stage';
export const PHASE_ATTR = '__execution_phase';

/** The placement attributes and the annotation each one becomes. */
export const PLACEMENT_ATTRS: readonly { readonly attr: string; readonly key: 'ipu' | 'stage' | 'phase'; readonly what: string; readonly setter: string }[] = [
  { attr: IPU_ATTR, key: 'ipu', what: 'the IPU (virtual graph) the node runs on', setter: 'Builder.virtualGraph' },
  { attr: STAGE_ATTR, key: 'stage', what: 'the pipeline stage of the node', setter: 'Builder.pipelineStage' },
  { attr: PHASE_ATTR, key: 'phase', what: 'the execution phase of the node', setter: 'Builder.executionPhase' },
];

/**
 * Whether a node attribute is one of PopART's annotations (`__ipu_number`, `__pipeline_stage`,
 * `__recompute_output_in_backward_pass`, ...), which any node may carry beside the attributes of
 * its op. ONNX's own attributes never begin with "__".
 */
export function isPopartAnnotation(name: string): boolean {
  return name.startsWith('__');
}

/** How an attribute's value reads in a message ("1.5 (a float)", "'one' (a string)", ...). */
function describe(a: AttributeProto): string {
  switch (a.type ?? ATTR_TYPE.UNDEFINED) {
    case ATTR_TYPE.FLOAT:
      return `${a.f ?? 0} (a float)`;
    case ATTR_TYPE.STRING:
      return `'${bytesToString(a.s)}' (a string)`;
    case ATTR_TYPE.INTS:
      return `[${(a.ints ?? []).map((x) => int64(x)).join(', ')}] (a list of ints)`;
    case ATTR_TYPE.FLOATS:
      return `[${(a.floats ?? []).join(', ')}] (a list of floats)`;
    case ATTR_TYPE.TENSOR:
      return 'a tensor';
    case ATTR_TYPE.GRAPH:
      return 'a graph';
    default:
      return `an attribute of type ${a.type}`;
  }
}

/**
 * The node's placement (`ipu`, `stage`, `phase` from PopART's attributes); empty when it has none.
 * A value that is not a non-negative integer is an error naming the node, the attribute and the value.
 */
export function placementOf(c: NodeContext): Annotations {
  const out: { ipu?: number; stage?: number; phase?: number } = {};
  for (const { attr, key, what, setter } of PLACEMENT_ATTRS) {
    const a = c.rawAttr(attr);
    if (!a) continue;
    const t = a.type ?? ATTR_TYPE.UNDEFINED;
    const isInt = t === ATTR_TYPE.INT || (t === ATTR_TYPE.UNDEFINED && a.i !== undefined && a.i !== null);
    const v = isInt ? int64(a.i) : undefined;
    if (v === undefined || !Number.isSafeInteger(v) || v < 0) {
      c.fail(`${attr} is ${v === undefined ? describe(a) : v}; it must be a non-negative integer (${what})`, [`PopART writes it with ${setter}`]);
    }
    out[key] = v;
  }
  return out;
}
