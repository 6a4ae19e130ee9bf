// Lint for the bugs that hurt in this codebase: a floating or misused promise
// (a claim or a completion that is never awaited), a non-exhaustive switch over
// claim outcomes, loose equality. Type-aware, over src, test and bench.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'dist-bench/**', 'node_modules/**', 'coverage/**', '.pack/**', 'examples/**', 'packages/*/dist/**', '**/*.mjs', '**/*.js'] },
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
    // The app uses the library (packages/idempotency) as an installed app would: through its
    // package name, `safe-retries`; the library's own build (rootDir src) keeps it from
    // importing anything outside its package. The card network simulator, a development tool,
    // is never a static import: card-network.module.ts loads it with import() when it embeds it.
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [{ name: '@safe-retries/card-network-simulator', message: 'A development tool: only CardNetworkModule loads it, with import(), when no CARD_NETWORK_URL is set.' }],
          patterns: [{ group: ['**/packages/*'], message: "Import a workspace package by its name ('safe-retries')." }],
        },
      ],
    },
  },
  {
    // The card network simulator is a tool of its own: neither its sources nor its tests
    // reach out of its package (to the app, the library or another workspace).
    files: ['packages/card-network-simulator/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ regex: '^(\\.\\./){2,}|^safe-retries(/|$)', message: 'The simulator imports nothing from outside its package.' }] },
      ],
    },
  },
  {
    // The callers' SDK runs in Node and browsers: nothing from outside its package, no Nest,
    // no node: module in its sources (its tests may use node:crypto to check its hashes).
    files: ['packages/client/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ regex: '^(\\.\\./){2,}|^safe-retries(/|$)|^@nestjs/|^@safe-retries/', message: 'The SDK imports nothing from the server, Nest or another workspace.' }] },
      ],
    },
  },
  {
    files: ['packages/client/src/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ regex: '^node:|^(\\.\\./){2,}|^@nestjs/|^safe-retries(/|$)|^@safe-retries/', message: 'The SDK runs in browsers too: no node: module, nothing from the server or Nest.' }] }],
    },
  },
  {
    files: ['test/**/*.ts', 'packages/*/test/**/*.ts'],
    rules: { '@typescript-eslint/no-non-null-assertion': 'off' },
  },
);
