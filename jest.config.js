// Jest runs CommonJS: @swc/jest compiles our TypeScript and Nest 12's ESM-only
// packages (jest's own loader cannot require ESM on Node 20). One embedded PostgreSQL serves the whole
// run; every e2e file gets a database of its own (test/support/database.ts).
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
  testMatch: ['**/*.spec.ts'],
  // The example app has its own package.json, jest config and node_modules: test/library
  // runs its tests there, against the packed package; the root's jest never loads it.
  testPathIgnorePatterns: ['/node_modules/', '<rootDir>/examples/'],
  modulePathIgnorePatterns: ['<rootDir>/examples/', '<rootDir>/.pack/'],
  transform: { '^.+\\.(t|j)s$': ['@swc/jest', swc] },
  // The workspace packages run from their sources (as tsconfig.json's paths say), so a test
  // that reaches a package's internals shares every class and token with the app under test.
  moduleNameMapper: {
    '^safe-retries$': '<rootDir>/packages/idempotency/src/index.ts',
    '^safe-retries/outbox$': '<rootDir>/packages/idempotency/src/outbox/index.ts',
    '^safe-retries/migrations$': '<rootDir>/packages/idempotency/src/migrations/index.ts',
    '^safe-retries/messages$': '<rootDir>/packages/idempotency/src/contexts/messages.ts',
    '^safe-retries/graphql$': '<rootDir>/packages/idempotency/src/contexts/graphql.ts',
    '^safe-retries/telemetry$': '<rootDir>/packages/idempotency/src/telemetry/index.ts',
    '^safe-retries/redis$': '<rootDir>/packages/idempotency/src/stores/redis/index.ts',
    '^safe-retries/nats$': '<rootDir>/packages/idempotency/src/outbox/nats/index.ts',
    '^safe-retries/swagger$': '<rootDir>/packages/idempotency/src/swagger/index.ts',
    '^safe-retries/testing$': '<rootDir>/packages/idempotency/src/testing/index.ts',
    '^@safe-retries/dev-postgres$': '<rootDir>/packages/dev-postgres/src/index.ts',
    '^@safe-retries/card-network-simulator$': '<rootDir>/packages/card-network-simulator/src/index.ts',
    '^@safe-retries/client$': '<rootDir>/packages/client/src/index.ts',
  },
  // ESM-only packages are transformed too: Nest's, the content-disposition 2 of @fastify/static
  // (which Swagger UI needs on Fastify), the cookie 1 of light-my-request (Fastify's inject) and
  // mercurius with the quick-lru it loads by import() (compiled to require here), wherever they
  // are nested.
  transformIgnorePatterns: ['^(?!.*/node_modules/(@nestjs|content-disposition|cookie|mercurius|quick-lru)/).*/node_modules/'],
  globalSetup: '<rootDir>/test/support/global-setup.ts',
  globalTeardown: '<rootDir>/test/support/global-teardown.ts',
  maxWorkers: 2,
  testTimeout: 60_000,
  reporters: ['default', '<rootDir>/test/support/summary-reporter.js'],
};
