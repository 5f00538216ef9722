export { printGraph, formatFloatLiteral, formatAttrValue, formatTensorLiteral, formatTypeText, isTextIdentifier } from './printer.js';
export type { PrintGraphOptions } from './printer.js';
export { parseGraph } from './parser.js';
