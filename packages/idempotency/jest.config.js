// The library's own tests: `npm test -w safe-retries`. They import the package by its
// names, mapped to its sources as tsconfig.json's paths say, and run against the
// repository's jest global setup (an embedded PostgreSQL of @safe-retries/dev-postgres,
// or DATABASE_URL; a redis-server, or REDIS_URL), which needs nothing of the app. The
// root's jest runs the same files with every other suite.
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
  testMatch: ['<rootDir>/test/**/*.spec.ts'],
  transform: { '^.+\\.(t|j)s$': ['@swc/jest', swc] },
  moduleNameMapper: {
    '^safe-retries$': '<rootDir>/src/index.ts',
    '^safe-retries/outbox$': '<rootDir>/src/outbox/index.ts',
    '^safe-retries/migrations$': '<rootDir>/src/migrations/index.ts',
    '^safe-retries/messages$': '<rootDir>/src/contexts/messages.ts',
    '^safe-retries/graphql$': '<rootDir>/src/contexts/graphql.ts',
    '^safe-retries/telemetry$': '<rootDir>/src/telemetry/index.ts',
    '^safe-retries/redis$': '<rootDir>/src/stores/redis/index.ts',
    '^safe-retries/nats$': '<rootDir>/src/outbox/nats/index.ts',
    '^safe-retries/swagger$': '<rootDir>/src/swagger/index.ts',
    '^safe-retries/testing$': '<rootDir>/src/testing/index.ts',
    '^@safe-retries/dev-postgres$': '<rootDir>/../dev-postgres/src/index.ts',
  },
  // Nest's packages and mercurius (with the quick-lru it imports) are ESM-only: transformed too.
  transformIgnorePatterns: ['^(?!.*/node_modules/(@nestjs|content-disposition|cookie|mercurius|quick-lru)/).*/node_modules/'],
  globalSetup: '<rootDir>/../../test/support/global-setup.ts',
  globalTeardown: '<rootDir>/../../test/support/global-teardown.ts',
  maxWorkers: 2,
  testTimeout: 60_000,
};
