import type { Op } from '@tilegraph/ir';
import type { GraphEmitter } from '../context.js';
import { ANNOTATION_LOWERINGS } from './annotation.js';
import { CONTROL_LOWERINGS } from './control.js';
import { CONV_LOWERINGS } from './conv.js';
import { CTC_LOWERINGS } from './ctc.js';
import { CUSTOM_LOWERINGS } from './custom.js';
import { ELEMENTWISE_OP_NAMES } from './elementwise.js';
import { MATMUL_LOWERINGS } from './matmul.js';
import { MOVEMENT_LOWERINGS } from './movement.js';
import { NORM_LOWERINGS } from './norm.js';
import { POOL_LOWERINGS } from './pool.js';
import { RANDOM_LOWERINGS } from './random.js';
import { REDUCE_LOWERINGS } from './reduce.js';
import { SOURCE_LOWERINGS } from './source.js';
import { STATE_LOWERINGS } from './state.js';

/** Emits the code of one op into the graph being generated and records its results' tensors. */
export type Lowering = (op: Op, e: GraphEmitter) => void;

/** Lowerings of every op except the element-wise ones (which are fused, see elementwise.ts). */
export const LOWERINGS: Readonly<Record<string, Lowering>> = {
  ...SOURCE_LOWERINGS,
  ...STATE_LOWERINGS,
  ...MATMUL_LOWERINGS,
  ...CONV_LOWERINGS,
  ...NORM_LOWERINGS,
  ...POOL_LOWERINGS,
  ...REDUCE_LOWERINGS,
  ...MOVEMENT_LOWERINGS,
  ...RANDOM_LOWERINGS,
  ...ANNOTATION_LOWERINGS,
  ...CTC_LOWERINGS,
  ...CUSTOM_LOWERINGS,
  ...CONTROL_LOWERINGS,
};

/**
 * Composite ops the `decompose` pass rewrites into primitives before code generation; reaching
 * the generator is an error telling the user to run that pass.
 */
export const DECOMPOSED_OPS: readonly string[] = [
  'softmax',
  'log_softmax',
  'batch_norm',
  'layer_norm',
  'group_norm',
  'global_avg_pool',
  'nll_loss',
  'cross_entropy',
];

/** The op names lowered by each family's file (lower/<family>.ts), keyed by OpDef.family. */
export const FAMILY_LOWERINGS: Readonly<Record<string, readonly string[]>> = {
  source: Object.keys(SOURCE_LOWERINGS),
  state: Object.keys(STATE_LOWERINGS),
  elementwise: ELEMENTWISE_OP_NAMES,
  matmul: Object.keys(MATMUL_LOWERINGS),
  conv: Object.keys(CONV_LOWERINGS),
  norm: Object.keys(NORM_LOWERINGS),
  pool: Object.keys(POOL_LOWERINGS),
  reduce: Object.keys(REDUCE_LOWERINGS),
  movement: Object.keys(MOVEMENT_LOWERINGS),
  random: Object.keys(RANDOM_LOWERINGS),
  annotation: Object.keys(ANNOTATION_LOWERINGS),
  ctc: Object.keys(CTC_LOWERINGS),
  custom: Object.keys(CUSTOM_LOWERINGS),
  control: Object.keys(CONTROL_LOWERINGS),
};

/** Every op the generator can emit code for. */
export const LOWERED_OPS: ReadonlySet<string> = new Set([...Object.keys(LOWERINGS), ...ELEMENTWISE_OP_NAMES]);
