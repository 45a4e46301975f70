// Machines are pure (docs/decisions/0003), enforced by the linter: prove the rule fires on IO in src/machines.
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const eslint = new ESLint({ cwd: process.cwd() });
const lint = async (code: string, filePath: string) =>
  (await eslint.lintText(code, { filePath }))[0]!.messages.map((m) => m.ruleId);

describe('machine purity lint rule', () => {
  it.each([
    ["import { readFileSync } from 'node:fs';\nexport const x = readFileSync;\n"],
    ["import Docker from 'dockerode';\nexport const x = Docker;\n"],
    ["import Database from 'better-sqlite3';\nexport const x = Database;\n"],
    ["import { SqliteEventStore } from '../store/sqlite/event-store.ts';\nexport const x = SqliteEventStore;\n"],
    ["import { x as y } from '../adapters/docker/dockerode-engine.ts';\nexport const x = y;\n"],
    ['export const now = () => Date.now();\n'],
  ])('rejects %s', async (code) => {
    const rules = await lint(code, 'src/machines/bad.machine.ts');
    expect(rules.some((r) => r === 'no-restricted-imports' || r === 'no-restricted-globals')).toBe(true);
  });

  it('allows xstate and domain imports', async () => {
    const rules = await lint(
      "import { setup } from 'xstate';\nimport type { MachineEvent } from '../domain/events.ts';\n" +
        'export const m = setup({});\nexport type E = MachineEvent;\n',
      'src/machines/ok.machine.ts',
    );
    expect(rules).toEqual([]);
  });

  it('does not apply outside src/machines', async () => {
    const rules = await lint(
      "import { readFileSync } from 'node:fs';\nexport const x = readFileSync;\n",
      'src/adapters/fine.ts',
    );
    expect(rules).toEqual([]);
  });
});
