// chevrotain for modules run under jest: jest's require() refuses ES modules, so the loader in
// packages/ir/src/text/chevrotain.ts (which require()s the package's bundle) is replaced here by
// the package's entry point. Tests that run the built command (test/cli-*.test.ts) use the loader.
export * from 'chevrotain';
