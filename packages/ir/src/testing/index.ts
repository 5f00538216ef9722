export * from './arbitrary.js';
export * from './kernels.js';
export * from './diagnostics.js';
