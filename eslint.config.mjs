// Lint for the bugs that hurt in this codebase: a floating or misused promise
// (a claim or a completion that is never awaited), a non-exhaustive switch over
// claim outcomes, loose equality. Type-aware, over src, test and bench.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'dist-bench/**', 'node_modules/**', 'coverage/**', '.pack/**', 'examples/**', '**/*.mjs', '**/*.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      eqeqeq: ['error', 'always'],
    },
  },
  {
    // The app uses the idempotency module as an installed app would: through its public entry
    // (src/idempotency/index.ts, the package root `safe-retries`), and the module imports
    // nothing of the app.
    files: ['src/**/*.ts'],
    // The card network simulator is a program of its own, built alone from main.ts (its test
    // compiles just that file): it takes only the module's dependency-free duration parser.
    ignores: ['src/idempotency/**', 'src/card-network-simulator/main.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ group: ['**/idempotency/*'], message: "Import from the module's public entry ('../idempotency')." }] }],
    },
  },
  {
    files: ['src/idempotency/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group: ['../*'], message: 'The idempotency module imports nothing from the app.' }] }] },
  },
  {
    files: ['src/idempotency/*/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group: ['../../*'], message: 'The idempotency module imports nothing from the app.' }] }] },
  },
  {
    files: ['test/**/*.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
