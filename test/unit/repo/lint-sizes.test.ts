// Issue 28's sizes are held by the linter: prove that a file in src/ over 600 lines, a function over 150 lines and a
// line over 140 characters are refused, and that the limits themselves pass. The TypeScript in test/, bench/ and
// scripts/ is held to the line limit alone.
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const eslint = new ESLint({ cwd: process.cwd() });
const rulesFor = async (code: string, filePath: string) =>
  (await eslint.lintText(code, { filePath }))[0]!.messages.map((m) => m.ruleId);
// `n` lines in all: one exported constant per line.
const fileOf = (n: number) => Array.from({ length: n }, (_, i) => `export const c${i} = ${i};`).join('\n') + '\n';
// A function of `n` lines in all, from its `function` line to its closing brace.
const functionOf = (n: number) =>
  [
    'export function f(): number {',
    '  let x = 0;',
    ...Array.from({ length: n - 4 }, () => '  x += 1;'),
    '  return x;',
    '}',
  ].join('\n') + '\n';

describe('size lint rules', () => {
  it('refuses a 601-line file in src/', async () => {
    expect(await rulesFor(fileOf(601), 'src/supervisor/host/big.ts')).toContain('max-lines');
  });

  it('accepts a 600-line file in src/', async () => {
    expect(await rulesFor(fileOf(600), 'src/supervisor/host/big.ts')).not.toContain('max-lines');
  });

  it('refuses a 151-line function in src/', async () => {
    expect(await rulesFor(functionOf(151), 'src/store/long.ts')).toContain('max-lines-per-function');
  });

  it('accepts a 150-line function in src/', async () => {
    expect(await rulesFor(functionOf(150), 'src/store/long.ts')).not.toContain('max-lines-per-function');
  });

  it('refuses a line of 141 characters in src/, a string or a comment as much as code', async () => {
    const line = (body: string) => body + 'x'.repeat(141 - body.length - 2) + "';\n";
    expect(await rulesFor(line("export const s = '"), 'src/cli/long.ts')).toContain('max-len');
    expect(await rulesFor(`// ${'x'.repeat(138)}\nexport const c = 1;\n`, 'src/cli/long.ts')).toContain('max-len');
  });

  it('accepts a line of 140 characters in src/', async () => {
    const line = "export const s = '" + 'x'.repeat(140 - 20) + "';\n";
    expect(line.length).toBe(141);
    expect(await rulesFor(line, 'src/cli/long.ts')).not.toContain('max-len');
  });

  it('refuses a line of 141 characters in test/, bench/ and scripts/, and accepts one of 140', async () => {
    const line = (n: number) => "export const s = '" + 'x'.repeat(n - 20) + "';\n";
    expect(line(141).length).toBe(142);
    for (const path of ['test/unit/long.test.ts', 'test/support/long.ts', 'bench/long.bench.ts', 'scripts/long.ts']) {
      expect(await rulesFor(line(141), path)).toContain('max-len');
      expect(await rulesFor(`// ${'x'.repeat(138)}\nexport const c = 1;\n`, path)).toContain('max-len');
      expect(await rulesFor(line(140), path)).not.toContain('max-len');
    }
  });

  it('holds test/, bench/ and scripts/ to the line limit only, not the file and function limits', async () => {
    for (const path of ['test/unit/long.test.ts', 'bench/long.bench.ts', 'scripts/long.ts']) {
      const rules = await rulesFor(fileOf(601) + functionOf(151), path);
      expect(rules).not.toContain('max-lines');
      expect(rules).not.toContain('max-lines-per-function');
    }
  });

  it('counts blank lines towards the file limit', async () => {
    expect(await rulesFor(fileOf(300) + '\n'.repeat(301), 'src/domain/blank.ts')).toContain('max-lines');
  });

  it('applies in every layer of src/', async () => {
    for (const dir of [
      'actors',
      'adapters/docker',
      'cli/commands',
      'config',
      'domain',
      'machines',
      'server',
      'store/postgres',
    ]) {
      expect(await rulesFor(functionOf(151), `src/${dir}/long.ts`)).toContain('max-lines-per-function');
    }
  });
});
