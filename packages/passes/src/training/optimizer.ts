import { DType, DiagnosticError, error } from '@tilegraph/ir';

/**
 * Optimizers with PopTorch's hyperparameters and defaults (poptorch.optim). Hyperparameters are
 * variable by default — held in device variables that setOptimizer rewrites without
 * recompiling — unless listed in `constant` (VariableAttributes.markAsConstant).
 */
export type OptimizerType = 'SGD' | 'Adam' | 'AdamW' | 'RMSprop' | 'LAMB';

export interface OptimizerSpec {
  readonly type: OptimizerType;
  /** Numeric hyperparameters by their torch names (lr, momentum, weight_decay, eps, ...). */
  readonly hyper: Readonly<Record<string, number>>;
  /** Boolean choices fixed at compile time (nesterov, amsgrad, centered, ...). */
  readonly flags: Readonly<Record<string, boolean>>;
  /** Element types of the gradient accumulator and the momenta. */
  readonly accumType: DType;
  readonly firstOrderMomentumAccumType: DType;
  readonly secondOrderMomentumAccumType: DType;
  /** Hyperparameters marked constant: baked into the graph. */
  readonly constant: readonly string[];
  /**
   * torch's param_groups after the default group: group k (1, 2, ... in list order) holds the
   * weights it names and the hyperparameters it sets; the rest are the default group's (`hyper`).
   * Weights in no group use `hyper` (PopART's group 0).
   */
  readonly paramGroups?: readonly ParamGroup[];
}

export interface ParamGroup {
  /** Names of the weights of the group. */
  readonly params: readonly string[];
  /** The hyperparameters the group sets itself. */
  readonly hyper: Readonly<Record<string, number>>;
}

/** A group as torch takes it: `{ params: ['fc1.weight'], lr: 0.01 }` (betas as a pair for Adam-like optimizers). */
export interface ParamGroupArgs {
  readonly params: readonly string[];
  readonly [k: string]: number | readonly number[] | readonly string[] | string | boolean | undefined;
}

/** Hyperparameters of the whole step, which no group can set. */
export const GLOBAL_HYPER: readonly string[] = ['loss_scaling', 'max_grad_norm'];

interface Schema {
  hyper: Record<string, number>;
  flags: Record<string, boolean>;
}

const COMMON_HYPER = { loss_scaling: 1, max_grad_norm: Infinity };

export const OPTIMIZER_SCHEMAS: Readonly<Record<OptimizerType, Schema>> = {
  SGD: {
    hyper: { lr: 0.01, momentum: 0, dampening: 0, weight_decay: 0, velocity_scaling: 1, ...COMMON_HYPER },
    flags: { nesterov: false, use_combined_accum: false },
  },
  Adam: {
    hyper: { lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0, ...COMMON_HYPER },
    flags: { amsgrad: false, bias_correction: true },
  },
  AdamW: {
    hyper: { lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01, ...COMMON_HYPER },
    flags: { amsgrad: false, bias_correction: true },
  },
  RMSprop: {
    hyper: { lr: 0.01, alpha: 0.99, eps: 1e-8, weight_decay: 0, momentum: 0, ...COMMON_HYPER },
    flags: { centered: false, use_tf_variant: false },
  },
  LAMB: {
    // PopTorch caps phi at the float16 maximum unless told otherwise (Infinity turns the cap off)
    hyper: { lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01, max_weight_norm: 65500, ...COMMON_HYPER },
    flags: { bias_correction: true },
  },
};

export interface OptimizerArgs {
  readonly [k: string]: number | boolean | readonly number[] | string | readonly string[] | readonly ParamGroupArgs[] | undefined;
}

/**
 * Builds an optimizer spec from torch-style keyword arguments: `betas: [b1, b2]` is accepted;
 * `accum_type`, `first_order_momentum_accum_type` (SGD: also `velocity_accum_type`),
 * `second_order_momentum_accum_type` take 'float32' or 'float16' (default float32 each);
 * `constant: ['lr']` marks hyperparameters constant; `param_groups` lists torch's parameter groups
 * (see ParamGroup). Unknown or invalid arguments are errors.
 */
export function makeOptimizer(type: OptimizerType, args: OptimizerArgs = {}): OptimizerSpec {
  const schema = OPTIMIZER_SCHEMAS[type];
  if (!schema) throw new DiagnosticError(error(`unknown optimizer '${type}' (known: ${Object.keys(OPTIMIZER_SCHEMAS).join(', ')})`));
  const hyper: Record<string, number> = { ...schema.hyper };
  const flags: Record<string, boolean> = { ...schema.flags };
  let accumType: DType = 'float32';
  let first: DType | undefined;
  let second: DType | undefined;
  let constant: string[] = [];
  let groups: unknown;
  const bad = (m: string) => new DiagnosticError(error(`${type}: ${m}`));
  const floatType = (k: string, v: unknown): DType => {
    if (v !== 'float32' && v !== 'float16') throw bad(`${k} must be 'float32' or 'float16', got ${JSON.stringify(v)}`);
    return v;
  };
  for (const [k, v] of Object.entries(args)) {
    if (v === undefined) continue;
    if (k === 'betas') {
      if (!Array.isArray(v) || v.length !== 2) throw bad('betas must be a pair [beta1, beta2]');
      hyper['beta1'] = Number(v[0]);
      hyper['beta2'] = Number(v[1]);
    } else if (k === 'accum_type') accumType = floatType(k, v);
    else if (k === 'first_order_momentum_accum_type' || (k === 'velocity_accum_type' && type === 'SGD')) first = floatType(k, v);
    else if (k === 'second_order_momentum_accum_type') second = floatType(k, v);
    else if (k === 'constant') {
      if (!Array.isArray(v)) throw bad('constant must be a list of hyperparameter names');
      constant = v.map(String);
    } else if (k === 'param_groups') groups = v;
    else if (k in schema.hyper || k in COMMON_HYPER) {
      if (typeof v !== 'number' || Number.isNaN(v)) throw bad(`${k} must be a number`);
      hyper[k] = v;
    } else if (k in schema.flags) {
      if (typeof v !== 'boolean') throw bad(`${k} must be true or false`);
      flags[k] = v;
    } else {
      const known = [...Object.keys(schema.hyper), ...Object.keys(schema.flags), 'betas', 'accum_type', 'first_order_momentum_accum_type', 'second_order_momentum_accum_type', ...(type === 'SGD' ? ['velocity_accum_type'] : []), 'constant', 'param_groups'];
      throw bad(`unknown argument '${k}' (arguments: ${known.join(', ')})`);
    }
  }
  for (const c of constant) if (!(c in hyper)) throw bad(`constant: '${c}' is not a hyperparameter of ${type}`);
  validateHyper(type, hyper, flags);
  const paramGroups = groups === undefined ? undefined : makeParamGroups(type, groups, hyper, flags);
  return {
    type,
    hyper,
    flags,
    accumType,
    // PopTorch: the momenta are float32 unless set, independently of accum_type
    firstOrderMomentumAccumType: first ?? 'float32',
    secondOrderMomentumAccumType: second ?? 'float32',
    constant,
    ...(paramGroups?.length ? { paramGroups } : {}),
  };
}

/** Parses and checks `param_groups`; each group's values are validated merged with the defaults. */
function makeParamGroups(type: OptimizerType, groups: unknown, hyper: Readonly<Record<string, number>>, flags: Readonly<Record<string, boolean>>): ParamGroup[] {
  const schema = OPTIMIZER_SCHEMAS[type];
  if (!Array.isArray(groups)) throw new DiagnosticError(error(`${type}: param_groups must be a list of groups such as { params: ['fc.weight'], lr: 0.01 }`));
  const out: ParamGroup[] = [];
  groups.forEach((g: unknown, i) => {
    const where = `${type}: param_groups[${i}]`;
    const bad = (m: string, notes: string[] = []) => new DiagnosticError(error(`${where}: ${m}`, undefined, notes));
    if (typeof g !== 'object' || g === null || Array.isArray(g)) throw bad('must be an object such as { params: [...], lr: 0.01 }');
    const rec = g as Record<string, unknown>;
    const params = rec['params'];
    if (!Array.isArray(params) || params.length === 0 || !params.every((p) => typeof p === 'string')) throw bad('params must be a non-empty list of weight names');
    const own: Record<string, number> = {};
    const settable = Object.keys(schema.hyper).filter((k) => !GLOBAL_HYPER.includes(k));
    for (const [k, v] of Object.entries(rec)) {
      if (k === 'params' || v === undefined) continue;
      if (k === 'betas' && 'beta1' in schema.hyper) {
        if (!Array.isArray(v) || v.length !== 2) throw bad('betas must be a pair [beta1, beta2]');
        own['beta1'] = Number(v[0]);
        own['beta2'] = Number(v[1]);
      } else if (GLOBAL_HYPER.includes(k)) {
        throw bad(`${k} applies to the whole step, not to a group`, [`set ${k} at the top level of the optimizer`]);
      } else if (k in schema.hyper) {
        if (typeof v !== 'number' || Number.isNaN(v)) throw bad(`${k} must be a number`);
        own[k] = v;
      } else if (k in schema.flags || k === 'constant' || k.endsWith('accum_type')) {
        throw bad(`${k} cannot differ between groups`, [`set ${k} at the top level of the optimizer`]);
      } else {
        throw bad(`unknown key '${k}'`, [`a group sets: params, ${settable.join(', ')}${'beta1' in schema.hyper ? ', betas' : ''}`]);
      }
    }
    const dup = params.find((p, j) => params.indexOf(p) !== j);
    if (dup !== undefined) throw bad(`'${dup}' is listed twice`);
    for (let j = 0; j < out.length; j++) {
      const both = params.find((p) => out[j]!.params.includes(p));
      if (both !== undefined) throw new DiagnosticError(error(`${type}: weight '${both}' is in param_groups[${j}] and param_groups[${i}]`, undefined, ['a weight belongs to one group at most']));
    }
    validateHyperIn(where, type, { ...hyper, ...own }, flags);
    out.push({ params: [...params] as string[], hyper: own });
  });
  return out;
}

/** The hyperparameters of group k (0: the default group; k ≥ 1: paramGroups[k - 1] over the defaults). */
export function groupHyper(spec: OptimizerSpec, k: number): Readonly<Record<string, number>> {
  return k === 0 ? spec.hyper : { ...spec.hyper, ...spec.paramGroups![k - 1]!.hyper };
}

/** The group of each grouped weight (1-based); weights not in the map are in the default group 0. */
export function groupIndex(spec: OptimizerSpec): Map<string, number> {
  const out = new Map<string, number>();
  (spec.paramGroups ?? []).forEach((g, i) => g.params.forEach((p) => out.set(p, i + 1)));
  return out;
}

/** The device variable of hyperparameter `name` of group k (k ≥ 1 for one the group sets itself). */
export function hyperVariableName(name: string, k = 0): string {
  return k === 0 ? `optimizer.${name}` : `optimizer.param_groups.${k}.${name}`;
}

/**
 * Checks the groups against the model's weights at compile time: every named weight must exist
 * and belong to one group only (a spec need not come from makeOptimizer).
 */
export function checkParamGroups(spec: OptimizerSpec, weights: readonly string[]): void {
  const groups = spec.paramGroups ?? [];
  if (groups.length === 0) return;
  const known = new Set(weights);
  const seen = new Map<string, number>();
  groups.forEach((g, i) => {
    for (const p of g.params) {
      if (!known.has(p)) {
        const some = weights.slice(0, 8).join(', ') + (weights.length > 8 ? `, ... (${weights.length} in all)` : '');
        const close = weights.filter((w) => w.toLowerCase().includes(p.toLowerCase()) || p.toLowerCase().includes(w.toLowerCase())).slice(0, 3);
        throw new DiagnosticError(
          error(`${spec.type}: param_groups[${i}] names '${p}', which is not a weight of the model`, undefined, [
            ...(close.length ? [`did you mean ${close.map((c) => `'${c}'`).join(' or ')}?`] : []),
            `the model's weights: ${some || '(none)'}`,
          ]),
        );
      }
      const j = seen.get(p);
      if (j !== undefined) throw new DiagnosticError(error(`${spec.type}: weight '${p}' is in param_groups[${j}] and param_groups[${i}]`, undefined, ['a weight belongs to one group at most']));
      seen.set(p, i);
    }
  });
}

export function validateHyper(type: OptimizerType, h: Readonly<Record<string, number>>, flags: Readonly<Record<string, boolean>>): void {
  validateHyperIn(type, type, h, flags);
}

function validateHyperIn(where: string, type: OptimizerType, h: Readonly<Record<string, number>>, flags: Readonly<Record<string, boolean>>): void {
  const bad = (m: string) => new DiagnosticError(error(`${where}: ${m}`));
  // setOptimizer values arrive here unchecked: a NaN or a string would reach the device silently
  for (const [k, v] of Object.entries(h)) if (typeof v !== 'number' || Number.isNaN(v)) throw bad(`${k} must be a number, got ${typeof v === 'string' ? JSON.stringify(v) : String(v)}`);
  if (!(h['lr']! >= 0)) throw bad(`lr must be >= 0, got ${h['lr']}`);
  if ('momentum' in h && !(h['momentum']! >= 0)) throw bad(`momentum must be >= 0, got ${h['momentum']}`);
  if ('weight_decay' in h && !(h['weight_decay']! >= 0)) throw bad(`weight_decay must be >= 0, got ${h['weight_decay']}`);
  for (const b of ['beta1', 'beta2', 'alpha']) {
    if (b in h && !(h[b]! >= 0 && h[b]! < 1)) throw bad(`${b} must be in [0, 1), got ${h[b]}`);
  }
  if ('eps' in h && !(h['eps']! >= 0)) throw bad(`eps must be >= 0, got ${h['eps']}`);
  if (!(h['loss_scaling']! > 0)) throw bad(`loss_scaling must be > 0, got ${h['loss_scaling']}`);
  if (!(h['max_grad_norm']! > 0)) throw bad(`max_grad_norm must be > 0, got ${h['max_grad_norm']}`);
  // phi = min(‖w‖, max_weight_norm): a negative cap would turn the step uphill
  if ('max_weight_norm' in h && !(h['max_weight_norm']! > 0)) throw bad(`max_weight_norm must be > 0, got ${h['max_weight_norm']}`);
  if (type === 'SGD' && flags['nesterov'] && (!(h['momentum']! > 0) || h['dampening'] !== 0)) {
    throw bad('nesterov momentum requires momentum > 0 and dampening = 0 (as torch.optim.SGD)');
  }
  if (type === 'SGD' && !(h['velocity_scaling']! > 0)) throw bad(`velocity_scaling must be > 0`);
}

/** The same optimizer with new hyperparameter values (setOptimizer): flags and types must not change. */
export function updateHyper(spec: OptimizerSpec, args: Readonly<Record<string, number>>): OptimizerSpec {
  const hyper = { ...spec.hyper };
  for (const [k, v] of Object.entries(args)) {
    if (!(k in hyper)) throw new DiagnosticError(error(`${spec.type}: unknown hyperparameter '${k}'`));
    hyper[k] = v;
  }
  validateHyper(spec.type, hyper, spec.flags);
  // groups fall back to the defaults for what they do not set: each must stay valid
  (spec.paramGroups ?? []).forEach((g, i) => validateHyperIn(`${spec.type}: param_groups[${i}]`, spec.type, { ...hyper, ...g.hyper }, spec.flags));
  return { ...spec, hyper };
}

/**
 * PopTorch's `optimizer.variable_attrs.markAsConstant(name)`: the hyperparameter is baked into
 * the graph (setOptimizer may no longer change it). Returns a new spec.
 */
export function markAsConstant(spec: OptimizerSpec, ...names: string[]): OptimizerSpec {
  for (const n of names) known(spec, 'markAsConstant', n);
  return { ...spec, constant: [...new Set([...spec.constant, ...names])] };
}

/** `variable_attrs.markAsVariable(name)`: the hyperparameter lives on the device again. */
export function markAsVariable(spec: OptimizerSpec, ...names: string[]): OptimizerSpec {
  for (const n of names) known(spec, 'markAsVariable', n);
  return { ...spec, constant: spec.constant.filter((c) => !names.includes(c)) };
}

/**
 * PopTorch's `optimizer.variable_attrs`: which hyperparameters are constant (baked into the graph)
 * and which variable (device variables setOptimizer rewrites). Specs are immutable, so the
 * marking methods return the new spec (as markAsConstant / markAsVariable do); `spec` is the latest.
 */
export class VariableAttributes {
  constructor(private current: OptimizerSpec) {}

  /** The spec with every marking made so far. */
  get spec(): OptimizerSpec {
    return this.current;
  }

  isConstant(name: string): boolean {
    known(this.current, 'isConstant', name);
    return this.current.constant.includes(name);
  }

  markAsConstant(name: string): OptimizerSpec {
    return (this.current = markAsConstant(this.current, name));
  }

  markAsVariable(name: string): OptimizerSpec {
    return (this.current = markAsVariable(this.current, name));
  }
}

/** `optimizer.variable_attrs` of a spec. */
export function variableAttrs(spec: OptimizerSpec): VariableAttributes {
  return new VariableAttributes(spec);
}

function known(spec: OptimizerSpec, what: string, n: string): void {
  if (!(n in spec.hyper)) throw new DiagnosticError(error(`${spec.type}: ${what}: '${n}' is not a hyperparameter (${Object.keys(spec.hyper).join(', ')})`));
}
