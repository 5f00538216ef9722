export * from './elementwise.js';
export * from './reduce.js';
