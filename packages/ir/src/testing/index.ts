export * from './arbitrary.js';
