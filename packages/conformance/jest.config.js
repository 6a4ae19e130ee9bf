// The kit's own tests, without the root's PostgreSQL: `npm test -w @safe-retries/conformance`.
// The root's jest runs the same files with every other suite, and test/e2e/conformance.spec.ts
// runs the kit against the service.
module.exports = {
  testEnvironment: 'node',
  rootDir: __dirname,
  testMatch: ['<rootDir>/test/**/*.spec.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' }, module: { type: 'commonjs' } }] },
};
