export * from './options.js';
export * from './onnx/index.js';
export * from './dsl/index.js';
export * from './api/index.js';
