export * from './backend.js';
export * from './io.js';
export * from './executor.js';
export * from './weights.js';
