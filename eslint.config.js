import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Rule 2 of DESIGN.md: machines are pure. Anything that can do IO is banned from src/machines.
const ioImports = {
  patterns: [
    { group: ['node:*'], message: 'src/machines is pure: no node:* imports (DESIGN.md rule 2).' },
    {
      group: ['fs', 'fs/*', 'path', 'os', 'child_process', 'net', 'http', 'https', 'crypto', 'stream', 'timers', 'worker_threads', 'process'],
      message: 'src/machines is pure: no Node built-ins (DESIGN.md rule 2).',
    },
    { group: ['dockerode', 'better-sqlite3', '@atproto/*', 'tar-stream'], message: 'src/machines is pure: no IO libraries.' },
    { group: ['**/adapters', '**/adapters/**', '**/store', '**/store/**', '**/actors', '**/actors/**', '**/cli/**'], message: 'src/machines may import only domain code and xstate.' },
  ],
};

export default tseslint.config(
  { ignores: ['node_modules/**', 'dist/**', 'artifacts/**', 'examples/**/node_modules/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'off',
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', URL: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', queueMicrotask: 'readonly' },
    },
  },
  {
    files: ['src/machines/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', ioImports],
      'no-restricted-globals': ['error', { name: 'Date', message: 'Time arrives inside events (DESIGN.md rule 2).' }, 'process', 'setTimeout', 'setInterval', 'fetch'],
    },
  },
  {
    files: ['src/domain/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', ioImports] },
  },
);
