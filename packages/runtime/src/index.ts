export { runGraph } from './reference/interpreter.js';
export type { RunOptions, RunResult } from './reference/interpreter.js';
