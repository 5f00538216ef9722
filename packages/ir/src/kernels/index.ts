export * from './elementwise.js';
export * from './reduce.js';
export * from './window.js';
export * from './softmax.js';
