export * from './backend.js';
export * from './io.js';
export * from './inputs.js';
export * from './executor.js';
export * from './weights.js';
export { executionSpecFrom, stepSettingsFrom } from './settings.js';
export type { WeightGrouping } from './settings.js';
export * from './models.js';
