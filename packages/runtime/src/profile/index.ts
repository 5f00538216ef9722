export * from './format.js';
export { compileProfile, writeCompileProfile } from './compile.js';
export type { CompileFacts } from './compile.js';
export * from './latency.js';
export { parseEngineOptions, profileFolderName, profilePlan } from './settings.js';
export type { ProfilePlan } from './settings.js';
