export * from './arbitrary.js';
export * from './kernels.js';
