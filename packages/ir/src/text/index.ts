export { printGraph, formatFloatLiteral, formatAttrValue, formatTensorLiteral, formatTypeText, isTextIdentifier } from './printer.js';
export type { PrintGraphOptions } from './printer.js';
export { MAX_TEXT_NESTING, parseGraph } from './parser.js';
