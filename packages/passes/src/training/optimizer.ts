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
}

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
  readonly [k: string]: number | boolean | readonly number[] | string | readonly string[] | undefined;
}

/**
 * Builds an optimizer spec from torch-style keyword arguments: `betas: [b1, b2]` is accepted;
 * `accum_type`, `first_order_momentum_accum_type` (SGD: also `velocity_accum_type`),
 * `second_order_momentum_accum_type` take 'float32' or 'float16' (default float32 each);
 * `constant: ['lr']` marks hyperparameters constant. Unknown or invalid arguments are errors.
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
    } else if (k in schema.hyper || k in COMMON_HYPER) {
      if (typeof v !== 'number' || Number.isNaN(v)) throw bad(`${k} must be a number`);
      hyper[k] = v;
    } else if (k in schema.flags) {
      if (typeof v !== 'boolean') throw bad(`${k} must be true or false`);
      flags[k] = v;
    } else {
      const known = [...Object.keys(schema.hyper), ...Object.keys(schema.flags), 'betas', 'accum_type', 'first_order_momentum_accum_type', 'second_order_momentum_accum_type', ...(type === 'SGD' ? ['velocity_accum_type'] : []), 'constant'];
      throw bad(`unknown argument '${k}' (arguments: ${known.join(', ')})`);
    }
  }
  for (const c of constant) if (!(c in hyper)) throw bad(`constant: '${c}' is not a hyperparameter of ${type}`);
  validateHyper(type, hyper, flags);
  return {
    type,
    hyper,
    flags,
    accumType,
    // PopTorch: the momenta are float32 unless set, independently of accum_type
    firstOrderMomentumAccumType: first ?? 'float32',
    secondOrderMomentumAccumType: second ?? 'float32',
    constant,
  };
}

export function validateHyper(type: OptimizerType, h: Readonly<Record<string, number>>, flags: Readonly<Record<string, boolean>>): void {
  const bad = (m: string) => new DiagnosticError(error(`${type}: ${m}`));
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
  return { ...spec, hyper };
}

/**
 * PopTorch's `optimizer.variable_attrs.markAsConstant(name)`: the hyperparameter is baked into
 * the graph (setOptimizer may no longer change it). Returns a new spec.
 */
export function markAsConstant(spec: OptimizerSpec, ...names: string[]): OptimizerSpec {
  for (const n of names) if (!(n in spec.hyper)) throw new DiagnosticError(error(`${spec.type}: markAsConstant: '${n}' is not a hyperparameter (${Object.keys(spec.hyper).join(', ')})`));
  return { ...spec, constant: [...new Set([...spec.constant, ...names])] };
}

/** `variable_attrs.markAsVariable(name)`: the hyperparameter lives on the device again. */
export function markAsVariable(spec: OptimizerSpec, ...names: string[]): OptimizerSpec {
  for (const n of names) if (!(n in spec.hyper)) throw new DiagnosticError(error(`${spec.type}: markAsVariable: '${n}' is not a hyperparameter (${Object.keys(spec.hyper).join(', ')})`));
  return { ...spec, constant: spec.constant.filter((c) => !names.includes(c)) };
}
