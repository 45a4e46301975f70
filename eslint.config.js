import js from '@eslint/js';
import tseslint from 'typescript-eslint';

// Machines are pure (docs/decisions/0003-pure-machines-with-effects-as-data.md). Anything that can do IO is banned from src/machines.
const ioImports = {
  patterns: [
    { group: ['node:*'], message: 'src/machines is pure: no node:* imports (docs/decisions/0003).' },
    {
      group: [
        'fs',
        'fs/*',
        'path',
        'os',
        'child_process',
        'net',
        'http',
        'https',
        'crypto',
        'stream',
        'timers',
        'worker_threads',
        'process',
      ],
      message: 'src/machines is pure: no Node built-ins (docs/decisions/0003).',
    },
    {
      group: ['dockerode', 'better-sqlite3', '@atproto/*', 'tar-stream'],
      message: 'src/machines is pure: no IO libraries.',
    },
    {
      group: [
        '**/adapters',
        '**/adapters/**',
        '**/store',
        '**/store/**',
        '**/supervisor',
        '**/supervisor/**',
        '**/inspect',
        '**/inspect/**',
        '**/cli/**',
      ],
      message: 'src/machines may import only domain code and xstate.',
    },
  ],
};

// The layers (CONTRIBUTING.md, docs/architecture/): cli|server → index|supervisor → inspect → adapters|machines|store|config
// → domain. Each layer names what it may not import; a file's own layer and the ones below it are allowed. (Machines
// and domain have the stricter purity rule above, which includes these.) `inspect` reads the log (inspection, verify,
// replay, snapshots): the supervisor answers inspect/replay through it, and it never starts or changes anything.
const layer = (message, ...dirs) => ({
  group: dirs.flatMap((d) => [`**/${d}`, `**/${d}/**`, `**/${d}.ts`]),
  message,
});
const below = {
  supervisor: layer(
    'src/supervisor sits under cli and server: it never imports them (the layer rule).',
    'cli',
    'server',
  ),
  inspect: layer(
    'src/inspect reads the log: it never imports the supervisor, adapters, cli or server (the layer rule).',
    'supervisor',
    'adapters',
    'cli',
    'server',
  ),
  adapters: layer(
    'src/adapters are IO behind our own ports: they never import the supervisor, inspect, cli, server, machines or the store (the layer rule).',
    'supervisor',
    'inspect',
    'cli',
    'server',
    'machines',
    'store',
  ),
  config: layer(
    'src/config says where things are (the parts, the home): it imports only the domain (the layer rule).',
    'supervisor',
    'inspect',
    'adapters',
    'machines',
    'store',
    'cli',
    'server',
  ),
  store: layer(
    'src/store holds the log: it never imports the supervisor, inspect, adapters, machines, cli or server (the layer rule).',
    'supervisor',
    'inspect',
    'adapters',
    'machines',
    'cli',
    'server',
  ),
  top: layer(
    'cli and server reach the rest through src/index.ts, src/supervisor or src/inspect (the layer rule); import what you need from there.',
    'adapters',
    'machines',
    'store',
  ),
};

// IO stays in adapters (issue 28): the supervisor reaches the disk only through src/adapters (src/adapters/files for
// plain reads, src/adapters/apps for app installs, src/adapters/archive for packing). It shares the rule object of the
// layer patterns above because a later no-restricted-imports for the same files replaces these options, not merges.
// src/inspect keeps its file reads: it opens the history files the user names (`runlog history`, replay) and writes
// nothing, and the layer rule bars it from src/adapters, so the read is its own input rather than IO behind a port.
const fsMessage =
  'src/supervisor does no file IO itself: put the read or write behind a function in src/adapters (src/adapters/files, apps, archive) and call that.';
const noFs = ['node:fs', 'node:fs/promises', 'fs', 'fs/promises'].map((name) => ({ name, message: fsMessage }));
// no-restricted-imports sees static imports only: the same modules loaded by import() or require() are caught here.
const fsModule = '/^(node:)?fs(\\/promises)?$/';
const noFsLoads = [
  { selector: `ImportExpression[source.value=${fsModule}]`, message: fsMessage },
  { selector: `CallExpression[callee.name='require'][arguments.0.value=${fsModule}]`, message: fsMessage },
];

// Sizes (issue 28): a file in src/ holds one job, at most 600 lines; a function, at most 150; a line, at most 140
// characters. The TypeScript in test/, bench/ and scripts/ is held to the line limit only: a test file gathers many
// cases, and the describe callback that holds them is one long function. Tested in test/unit/repo/lint-sizes.test.ts.
// Prettier wraps code at 120 but leaves strings and comments whole: those are held to 140 here.
const maxLen = ['error', { code: 140, tabWidth: 2 }];
const sizes = {
  'max-lines': ['error', { max: 600, skipBlankLines: false, skipComments: false }],
  'max-lines-per-function': ['error', { max: 150, skipBlankLines: false, skipComments: false, IIFEs: true }],
  'max-len': maxLen,
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
      globals: {
        process: 'readonly',
        console: 'readonly',
        URL: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        queueMicrotask: 'readonly',
      },
    },
  },
  {
    files: ['src/machines/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', ioImports],
      'no-restricted-globals': [
        'error',
        { name: 'Date', message: 'Time arrives inside events (docs/decisions/0003).' },
        'process',
        'setTimeout',
        'setInterval',
        'fetch',
      ],
    },
  },
  {
    files: ['src/domain/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...ioImports.patterns,
            layer(
              'src/domain is the bottom layer: it imports nothing of runlog but the domain.',
              'machines',
              'server',
              'supervisor',
              'inspect',
              'adapters',
              'store',
              'cli',
            ),
          ],
        },
      ],
    },
  },
  {
    files: ['src/supervisor/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { paths: noFs, patterns: [below.supervisor] }],
      'no-restricted-syntax': ['error', ...noFsLoads],
    },
  },
  {
    files: ['src/inspect/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [below.inspect] }] },
  },
  {
    files: ['src/adapters/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [below.adapters] }] },
  },
  {
    files: ['src/config/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [below.config] }] },
  },
  {
    files: ['src/store/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [below.store] }] },
  },
  {
    files: ['src/cli/**/*.ts', 'src/server/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [below.top] }] },
  },
  { files: ['src/**/*.ts'], rules: sizes },
  { files: ['test/**/*.ts', 'bench/**/*.ts', 'scripts/**/*.ts'], rules: { 'max-len': maxLen } },
);
