export * as ast from './ast.js';
export type { ModelFile } from './ast.js';
export { DslError } from './errors.js';
export { ELABORATION_LIMITS, Elaborator, seedFromName } from './elaborate.js';
export type { ElaborateOptions, Elaboration } from './elaborate.js';
export {
  DEFAULT_DSL_EXCLUDES,
  MAX_IMPORT_DEPTH,
  MAX_MODEL_FILE_BYTES,
  STDLIB_DIR,
  STDLIB_PREFIX,
  compileModelSource,
  compileModelSourceFull,
  SPECIAL_TREES,
  fileKind,
  isInside,
  realOrResolved,
  specialTreeOf,
  loadModelFile,
  loadModelFileFull,
  parseModelSource,
} from './loader.js';
export type { LoadOptions, ModelCompilation } from './loader.js';
export { MAX_NESTING, grammarProblems, parseFile } from './parser.js';
export type { ParseResult, SyntaxProblem } from './parser.js';
