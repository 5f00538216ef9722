import { Graph } from '@tilegraph/ir';
import { Options } from '@tilegraph/frontend';
import { OptimizerSpec } from '@tilegraph/passes';
import * as runtime from '@tilegraph/runtime';

/**
 * trainingModel / inferenceModel on the reference interpreter. The session-semantics tests check
 * the session layer (layouts, output modes, reductions, grouping), not code generation, which
 * the compiled-backend tests cover; running them on the interpreter keeps them fast.
 */
export function trainingModel(g: Graph, o: Options, opt: OptimizerSpec, s: runtime.ExecutorSettings = {}): runtime.TrainingModel {
  return runtime.trainingModel(g, o, opt, { backend: runtime.referenceBackend, ...s });
}

export function inferenceModel(g: Graph, o: Options, s: runtime.ExecutorSettings = {}): runtime.InferenceModel {
  return runtime.inferenceModel(g, o, { backend: runtime.referenceBackend, ...s });
}
