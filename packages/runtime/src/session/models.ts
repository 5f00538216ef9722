import { DiagnosticError, Graph, Module, Tensor, error, warning } from '@tilegraph/ir';
import { Options } from '@tilegraph/frontend';
import { OptimizerSpec, StepSettings, buildInferenceModuleSteps, buildTrainingModuleSteps, groupHyper, hyperVariableName, updateHyper } from '@tilegraph/passes';
import { Waiting } from '../compiled/drive.js';
import { ExecutorSettings, PoplarExecutor } from './executor.js';
import { preparedGraph } from './graph.js';

/** The two kinds of model PopTorch has: inferenceModel and trainingModel, on the executor they share. */

export class InferenceModel extends PoplarExecutor {
  readonly kind = 'inference';
  protected get outputGraph(): string {
    return 'forward';
  }
  protected buildModule(step: StepSettings): Waiting<Module> {
    return buildInferenceModuleSteps(preparedGraph(this.model, this.options), step, this.warnings);
  }
}

export class TrainingModel extends PoplarExecutor {
  readonly kind = 'training';
  private optimizer: OptimizerSpec;
  private lossName = 'loss';

  constructor(model: Graph, options: Options, optimizer: OptimizerSpec, settings: ExecutorSettings = {}) {
    super(model, options, settings);
    this.optimizer = optimizer;
  }
  protected get outputGraph(): string {
    return 'step';
  }
  get lossOutput(): string {
    return this.lossName;
  }
  protected *buildModule(step: StepSettings): Waiting<Module> {
    const t = yield* buildTrainingModuleSteps(preparedGraph(this.model, this.options), step, this.optimizer, this.settings.passes ?? {});
    this.lossName = t.lossOutput;
    this.passTimings = t.timings;
    this.warnings.push(...t.diagnostics);
    return t.module;
  }

  protected override savedOptimizer(): { optimizer: OptimizerSpec } {
    return { optimizer: this.optimizer };
  }

  /** The optimizer currently in use. */
  get currentOptimizer(): OptimizerSpec {
    return this.optimizer;
  }

  /**
   * Attributes of a setOptimizer record that the optimizer has. An unknown one is an error, or,
   * with Options.relaxOptimizerAttributesChecks(), a warning and left out (PopTorch warns
   * where tilegraph refuses: a misspelt learning rate would otherwise go unnoticed).
   */
  private knownAttributes(attrs: Readonly<Record<string, number>>): Record<string, number> {
    const cur = this.optimizer;
    const unknown = Object.keys(attrs).filter((k) => !(k in cur.hyper));
    if (unknown.length === 0) return { ...attrs };
    const list = unknown.map((k) => `'${k}'`).join(', ');
    const known = `${cur.type}'s attributes: ${Object.keys(cur.hyper).join(', ')}`;
    if (!this.options.relax_optimizer_attributes_checks) {
      throw new DiagnosticError(error(`setOptimizer: ${cur.type} has no attribute ${list}`, undefined, [known, 'Options.relaxOptimizerAttributesChecks() makes unknown attributes a warning instead']));
    }
    this.warnLater(warning(`setOptimizer: ${cur.type} has no attribute ${list}; ignored (relaxOptimizerAttributesChecks)`, undefined, [known]));
    return Object.fromEntries(Object.entries(attrs).filter(([k]) => k in cur.hyper));
  }

  /**
   * Changes hyperparameters without recompiling (they live in device variables). Changes that
   * alter the structure of the update — a momentum turned on, clipping turned on, a different
   * optimizer type or a constant hyperparameter — need a new model. A spec with param_groups
   * must have the groups compiled in (same weights, same hyperparameters set per group); plain
   * values (`{ lr: 0.5 }`) change the default group.
   */
  setOptimizer(next: OptimizerSpec | Readonly<Record<string, number>>): void {
    this.usable('setOptimizer');
    const cur = this.optimizer;
    const spec = 'type' in next && typeof next.type === 'string' ? (next as OptimizerSpec) : updateHyper(cur, this.knownAttributes(next as Record<string, number>));
    const problems: string[] = [];
    if (spec.type !== cur.type) problems.push(`the optimizer type changes from ${cur.type} to ${spec.type}`);
    for (const [k, v] of Object.entries(spec.flags)) if (cur.flags[k] !== v) problems.push(`${k} changes from ${cur.flags[k]} to ${v}`);
    // element types of the accumulator and momenta are fixed in the compiled step
    for (const [label, key] of [
      ['accum_type', 'accumType'],
      ['first_order_momentum_accum_type', 'firstOrderMomentumAccumType'],
      ['second_order_momentum_accum_type', 'secondOrderMomentumAccumType'],
    ] as const) {
      if (spec[key] !== cur[key]) problems.push(`${label} changes from ${cur[key]} to ${spec[key]}`);
    }
    const madeConstant = spec.constant.filter((k) => !cur.constant.includes(k));
    const madeVariable = cur.constant.filter((k) => !spec.constant.includes(k));
    if (madeConstant.length) problems.push(`${madeConstant.join(', ')} would become constant`);
    if (madeVariable.length) problems.push(`${madeVariable.join(', ')} was marked constant and would become variable`);
    problems.push(...groupProblems(cur, spec));
    if (problems.length) throw new DiagnosticError(error('setOptimizer: this change needs a recompilation (create a new trainingModel)', undefined, problems));
    this.optimizer = spec;
    if (!this.module) return;
    const writes: [string, number][] = Object.entries(spec.hyper).map(([k, v]) => [hyperVariableName(k), v]);
    (spec.paramGroups ?? []).forEach((g, i) => writes.push(...Object.entries(g.hyper).map(([k, v]): [string, number] => [hyperVariableName(k, i + 1), v])));
    for (const [name, v] of writes) {
      if (this.module.variables.has(name)) this.backend!.write(name, Tensor.scalar('float32', v));
    }
  }
}

/**
 * What in a change of hyperparameters the compiled step cannot follow, group by group (the
 * default group first): the groups themselves, constants and the switches of the update's
 * structure.
 */
function groupProblems(cur: OptimizerSpec, spec: OptimizerSpec): string[] {
  const problems: string[] = [];
  const a = cur.paramGroups ?? [];
  const b = spec.paramGroups ?? [];
  if (a.length !== b.length) return [`the number of param_groups changes from ${a.length} to ${b.length}`];
  const sameSet = (x: readonly string[], y: readonly string[]) => x.length === y.length && x.every((p) => y.includes(p));
  a.forEach((g, i) => {
    if (!sameSet(g.params, b[i]!.params)) problems.push(`the weights of param_groups[${i}] change (group membership is fixed when compiling)`);
    // a group reads its own variable for what it sets and the default group's for the rest
    if (!sameSet(Object.keys(g.hyper), Object.keys(b[i]!.hyper))) {
      problems.push(`param_groups[${i}] sets ${Object.keys(b[i]!.hyper).join(', ') || 'nothing'} instead of ${Object.keys(g.hyper).join(', ') || 'nothing'}`);
    }
  });
  if (problems.length) return problems;
  for (let k = 0; k <= a.length; k++) {
    const hOld = groupHyper(cur, k);
    const hNew = groupHyper(spec, k);
    const where = k === 0 ? '' : ` in param_groups[${k - 1}]`;
    // a group reports only what it sets itself: the rest is the default group's, reported once
    for (const [n, v] of Object.entries(k === 0 ? hNew : b[k - 1]!.hyper)) {
      const old = hOld[n]!;
      if (cur.constant.includes(n) && v !== old) problems.push(`${n} was marked constant${where}`);
      if ((n === 'momentum' || n === 'max_grad_norm' || n === 'max_weight_norm') && (old === 0 || !Number.isFinite(old)) !== (v === 0 || !Number.isFinite(v))) {
        problems.push(`${n} changes from ${old} to ${v}${where}, which changes the update's structure`);
      }
    }
  }
  return problems;
}

/** PopTorch's trainingModel: the step (forward, loss, backward, reduction, update) runs on the device. */
export function trainingModel(model: Graph, options: Options, optimizer: OptimizerSpec, settings: ExecutorSettings = {}): TrainingModel {
  return new TrainingModel(model, options, optimizer, settings);
}

/** PopTorch's inferenceModel. */
export function inferenceModel(model: Graph, options: Options, settings: ExecutorSettings = {}): InferenceModel {
  return new InferenceModel(model, options, settings);
}
