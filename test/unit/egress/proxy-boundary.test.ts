// The egress proxy runs its TypeScript sources under plain Node, with no dependencies (docs/decisions/0012): its
// folder imports only node: built-ins, itself and the egress domain files, which import only each other; every one
// of them is erasable TypeScript (no enums, parameter properties or namespaces); and its entry point loads and runs
// its self-test under `node` alone, no tsx. Its codes are codes of the one table.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { stripTypeScriptTypes } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EGRESS_CONTROL_CODES, EGRESS_REFUSAL_CODES } from '../../../src/domain/at-run/egress-codes.ts';
import { ERROR_CODES } from '../../../src/domain/error-codes.ts';

const REPO = join(import.meta.dirname, '../../..');
const PROXY = join(REPO, 'src/adapters/egress/proxy');
const DOMAIN = join(REPO, 'src/domain/at-run');
const proxyFiles = readdirSync(PROXY)
  .filter((f) => f.endsWith('.ts'))
  .map((f) => join(PROXY, f));
const domainFiles = readdirSync(DOMAIN)
  .filter((f) => /^egress-.*\.ts$/.test(f))
  .map((f) => join(DOMAIN, f));

/** Every module specifier a file imports or re-exports, static or dynamic. */
function specifiers(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const found: string[] = [];
  for (const re of [
    /\bfrom\s+'([^']+)'/g,
    /\bimport\s+'([^']+)'/g,
    /\bimport\(\s*'([^']+)'\s*\)/g,
    /require\(\s*'([^']+)'/g,
  ])
    for (const m of text.matchAll(re)) found.push(m[1] as string);
  return found;
}

const isDomainEgress = (path: string): boolean =>
  dirname(path) === DOMAIN && /^egress-.*\.ts$/.test(relative(DOMAIN, path));

describe('the egress proxy runs under plain Node', () => {
  it('has its files where this test looks', () => {
    expect(proxyFiles.map((f) => relative(PROXY, f))).toEqual(expect.arrayContaining(['main.ts', 'tunnel.ts']));
    expect(domainFiles.map((f) => relative(DOMAIN, f))).toEqual(
      expect.arrayContaining(['egress-address.ts', 'egress-decision.ts', 'egress-grant.ts']),
    );
  });

  it('imports only node: built-ins, its own folder and the egress domain files', () => {
    const bad: string[] = [];
    for (const file of proxyFiles)
      for (const spec of specifiers(file)) {
        if (spec.startsWith('node:')) continue;
        const target = spec.startsWith('.') ? resolve(dirname(file), spec) : '';
        if (!target.endsWith('.ts') || (dirname(target) !== PROXY && !isDomainEgress(target)))
          bad.push(`${relative(REPO, file)}: ${spec}`);
      }
    expect(bad).toEqual([]);
  });

  it('leaves the egress domain files importing only each other', () => {
    const bad: string[] = [];
    for (const file of domainFiles)
      for (const spec of specifiers(file))
        if (!spec.startsWith('node:') && !isDomainEgress(resolve(dirname(file), spec)))
          bad.push(`${relative(REPO, file)}: ${spec}`);
    expect(bad).toEqual([]);
  });

  it('writes only erasable TypeScript (what Node strips without transforming)', () => {
    for (const file of [...proxyFiles, ...domainFiles])
      expect(() => stripTypeScriptTypes(readFileSync(file, 'utf8')), relative(REPO, file)).not.toThrow();
    expect(() => stripTypeScriptTypes('enum E { A }')).toThrow();
    expect(() => stripTypeScriptTypes('class A { constructor(private x: number) {} }')).toThrow();
  });

  it('starts from main.ts under node alone and passes its self-test', () => {
    const env = { ...process.env };
    delete env.NODE_OPTIONS;
    const r = spawnSync(process.execPath, [join(PROXY, 'main.ts'), '--selftest'], {
      encoding: 'utf8',
      env,
      timeout: 15_000,
    });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ ok: true, node: process.version });
  });

  it('answers with codes of the one error table', () => {
    for (const code of [...EGRESS_REFUSAL_CODES, ...EGRESS_CONTROL_CODES])
      expect(ERROR_CODES, code).toHaveProperty(code);
  });
});
