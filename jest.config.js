/** Tests run from TypeScript sources (ts-jest, ESM); packages are mapped to their src entry. */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  roots: ['<rootDir>/packages', '<rootDir>/tools', '<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  moduleNameMapper: {
    '^@tilegraph/tools$': '<rootDir>/tools/src/index.ts',
    // see test/support/chevrotain.ts
    '^@tilegraph/ir/chevrotain$': '<rootDir>/test/support/chevrotain.ts',
    '^\\./chevrotain\\.js$': '<rootDir>/test/support/chevrotain.ts',
    '^@tilegraph/(.*)$': '<rootDir>/packages/$1/src/index.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/tsconfig.jest.json' }],
  },
  testTimeout: 60000,
  // two suites at a time: most of a suite's time is spent loading and transforming modules, which
  // overlaps well with another suite's C++ builds (jest's default on two cores is one)
  maxWorkers: 2,
  globalSetup: '<rootDir>/test/support/global-setup.js',
};
