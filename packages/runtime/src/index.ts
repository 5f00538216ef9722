export { runGraph } from './reference/interpreter.js';
export type { RunOptions, RunResult } from './reference/interpreter.js';
export { ModuleInterpreter } from './reference/module.js';
export type { ModuleRunOptions } from './reference/module.js';
export * from './session/index.js';
export * from './data/dataloader.js';
export * from './compiled/index.js';
export * from './progress.js';
export * from './profile/index.js';
