import { Diagnostic, DiagnosticError, Location, error } from '@tilegraph/ir';

/**
 * The model uses something the IR cannot express (an op type without a mapping, a data type the
 * device lacks, a data-dependent shape). Tools tell this apart from a malformed model: the
 * conformance harness counts it as "unsupported", not "failed".
 */
export class OnnxUnsupportedError extends DiagnosticError {
  /** Op types (with their domain when not the default one) the importer has no mapping for. */
  readonly ops: readonly string[];
  /**
   * Graph inputs whose values would have to be known at import for the model to import (they
   * decide a shape); see OnnxImportOptions.constantInputs.
   */
  readonly needsConstantInputs: readonly string[];
  constructor(diagnostics: readonly Diagnostic[] | Diagnostic, ops: readonly string[] = [], needsConstantInputs: readonly string[] = []) {
    super(diagnostics);
    this.name = 'OnnxUnsupportedError';
    this.ops = ops;
    this.needsConstantInputs = needsConstantInputs;
  }
}

export function fail(message: string, loc?: Location, notes?: readonly string[]): never {
  throw new DiagnosticError(error(message, loc, notes));
}

export function unsupported(message: string, loc?: Location, notes?: readonly string[]): never {
  throw new OnnxUnsupportedError(error(message, loc, notes));
}
