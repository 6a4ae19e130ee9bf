// jest in CommonJS mode, @swc/jest compiling the TypeScript and Nest 12's ESM-only
// packages (jest's own loader cannot require ESM on Node 20). The tests need
// DATABASE_URL: a PostgreSQL database they may create tables in.
const swc = {
  jsc: {
    parser: { syntax: 'typescript', decorators: true },
    transform: { legacyDecorator: true, decoratorMetadata: true },
    keepClassNames: true,
    target: 'es2022',
  },
  module: { type: 'commonjs' },
  sourceMaps: 'inline',
};

module.exports = {
  testEnvironment: 'node',
  rootDir: __dirname,
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.spec.ts'],
  transform: { '^.+\\.(t|j)s$': ['@swc/jest', swc] },
  transformIgnorePatterns: ['/node_modules/(?!(@nestjs)/)'],
  testTimeout: 60_000,
};
