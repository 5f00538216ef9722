/**
 * chevrotain's runtime API, loaded from the single-module build the package ships beside its
 * entry point: the entry point loads the library as a few hundred small modules, about 0.2 s of
 * every process start, where the bundle takes about 15 ms. Both are the same release (the bundle
 * is built from the sources the entry point loads); if the bundle is missing, the entry point is
 * used. Loaded with require(), which takes ES modules on the Node.js versions this package
 * supports, so importing this module stays synchronous (no top-level await, which require()
 * of this package would refuse). Types come from the package as usual.
 */
import { createRequire } from 'node:module';
import * as path from 'node:path';

type Chevrotain = typeof import('chevrotain');

function load(): Chevrotain {
  const require = createRequire(import.meta.url);
  try {
    // <package>/lib/src/api.js is the entry; the bundle is <package>/lib/chevrotain.mjs
    return require(path.join(path.dirname(require.resolve('chevrotain')), '..', 'chevrotain.mjs')) as Chevrotain;
  } catch {
    return require('chevrotain') as Chevrotain;
  }
}

export const { CstParser, EOF, Lexer, createToken, createTokenInstance, tokenLabel } = load();
export type CstParser = import('chevrotain').CstParser;
export type Lexer = import('chevrotain').Lexer;
export type { CstNode, ILexingError, IParserErrorMessageProvider, IRecognitionException, IToken, TokenType } from 'chevrotain';
