import { Op } from '@tilegraph/ir';
import { GraphEmitter } from '../context.js';
import type { Lowering } from './index.js';
import { lowerState } from './source.js';

/**
 * Persistent state: `variable` reads the module's state tensor like a parameter; `assign`
 * writes it when the graph finishes (the graph epilogue copies after the outputs have streamed
 * out, so every read in the graph sees the old value).
 */

function lowerAssign(op: Op, e: GraphEmitter): void {
  e.assigns.push(op);
}

export const STATE_LOWERINGS: Record<string, Lowering> = {
  variable: lowerState,
  assign: lowerAssign,
};
