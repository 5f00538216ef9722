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
  /** A bound the import needs for a data-dependent output size; see OnnxImportOptions.maxOutputs. */
  readonly needsOutputBound?: OutputBoundRequest;
  constructor(
    diagnostics: readonly Diagnostic[] | Diagnostic,
    ops: readonly string[] = [],
    needsConstantInputs: readonly string[] = [],
    needsOutputBound?: OutputBoundRequest,
  ) {
    super(diagnostics);
    this.name = 'OnnxUnsupportedError';
    this.ops = ops;
    this.needsConstantInputs = needsConstantInputs;
    if (needsOutputBound) this.needsOutputBound = needsOutputBound;
  }
}

/**
 * The bound of a data-dependent size: `key` is what OnnxImportOptions.maxOutputs takes, and
 * `outputs` the node's outputs whose dimension `axis` has that size (a tool that knows an
 * expected output can read the bound from it).
 */
export interface OutputBoundRequest {
  readonly key: string;
  readonly outputs: readonly { readonly name: string; readonly axis: number }[];
}

export function fail(message: string, loc?: Location, notes?: readonly string[]): never {
  throw new DiagnosticError(error(message, loc, notes));
}

export function unsupported(message: string, loc?: Location, notes?: readonly string[]): never {
  throw new OnnxUnsupportedError(error(message, loc, notes));
}
