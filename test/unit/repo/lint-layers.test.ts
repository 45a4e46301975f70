// The layers are held by the linter: cli|server → index|supervisor → inspect → adapters|machines|store → domain.
// Prove the import rule fires where a layer reaches up or past its neighbour, and stays quiet where it may; and that
// the supervisor does no file IO of its own (node:fs only in adapters, the store and inspect).
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const eslint = new ESLint({ cwd: process.cwd() });
const rulesFor = async (code: string, filePath: string) =>
  (await eslint.lintText(code, { filePath }))[0]!.messages.map((m) => m.ruleId);
const importOf = (from: string) => `import * as m from '${from}';\nexport const x = m;\n`;

describe('layer lint rule', () => {
  it.each([
    ['src/adapters/docker/bad.ts', '../../supervisor/runlog.ts'],
    ['src/adapters/bad.ts', '../supervisor/host/actor-host.ts'],
    ['src/adapters/sandbox/bad.ts', '../../store/sqlite/event-store.ts'],
    ['src/adapters/sandbox/bad.ts', '../../machines/instance.machine.ts'],
    ['src/store/bad.ts', '../supervisor/host/actor-host.ts'],
    ['src/store/bad.ts', '../adapters/docker/dockerode-engine.ts'],
    ['src/supervisor/bad.ts', '../cli/output.ts'],
    ['src/supervisor/host/bad.ts', '../../server/http.ts'],
    ['src/inspect/bad.ts', '../supervisor/runlog.ts'],
    ['src/inspect/bad.ts', '../adapters/docker/docker-port.ts'],
    ['src/store/bad.ts', '../inspect/inspection.ts'],
    ['src/machines/bad.ts', '../inspect/inspection.ts'],
    ['src/supervisor/bad.ts', '../server/http.ts'],
    ['src/cli/bad.ts', '../adapters/atproto/index.ts'],
    ['src/cli/commands/bad.ts', '../../store/sqlite/event-store.ts'],
    ['src/server/bad.ts', '../machines/runtime.ts'],
    ['src/domain/bad.ts', '../machines/instance.machine.ts'],
    ['src/domain/bad.ts', '../server/http.ts'],
  ])('%s may not import %s', async (file, from) => {
    expect(await rulesFor(importOf(from), file)).toContain('no-restricted-imports');
  });

  it.each([
    ['src/cli/ok.ts', '../supervisor/runlog.ts'],
    ['src/cli/ok.ts', '../index.ts'],
    ['src/cli/ok.ts', '../domain/errors.ts'],
    ['src/server/ok.ts', '../inspect/inspection.ts'],
    ['src/supervisor/ok.ts', '../adapters/docker/docker-port.ts'],
    ['src/supervisor/host/ok.ts', '../../inspect/snapshots.ts'],
    ['src/inspect/ok.ts', '../store/sqlite/event-store.ts'],
    ['src/inspect/ok.ts', '../machines/runtime.ts'],
    ['src/supervisor/ok.ts', '../store/sqlite/event-store.ts'],
    ['src/supervisor/ok.ts', '../machines/runtime.ts'],
    ['src/adapters/docker/ok.ts', '../../domain/errors.ts'],
    ['src/adapters/docker/ok.ts', './dockerode-engine.ts'],
    ['src/store/ok.ts', '../domain/events.ts'],
  ])('%s may import %s', async (file, from) => {
    expect(await rulesFor(importOf(from), file)).toEqual([]);
  });
});

describe('no file IO in the supervisor lint rule', () => {
  const messagesFor = async (code: string, filePath: string) =>
    (await eslint.lintText(code, { filePath }))[0]!.messages;

  it.each([
    ['src/supervisor/bad.ts', 'node:fs'],
    ['src/supervisor/host/bad.ts', 'node:fs/promises'],
    ['src/supervisor/instances/bad.ts', 'fs'],
    ['src/supervisor/executions/pool/bad.ts', 'fs/promises'],
  ])('%s may not import %s, and is told to go through an adapter', async (file, from) => {
    const messages = await messagesFor(importOf(from), file);
    expect(messages.map((m) => m.ruleId)).toEqual(['no-restricted-imports']);
    expect(messages[0]!.message).toContain('src/adapters');
  });

  it.each([
    ['src/supervisor/bad.ts', "export const load = () => import('node:fs');\n"],
    ['src/supervisor/retention/bad.ts', "export const load = () => import('fs/promises');\n"],
  ])('%s may not load the file system with a dynamic import either', async (file, code) => {
    expect(await rulesFor(code, file)).toEqual(['no-restricted-syntax']);
  });

  it('keeps the layer patterns for the supervisor beside the file-system ban', async () => {
    const code =
      "import { readFileSync } from 'node:fs';\nimport { out } from '../cli/output.ts';\nexport const x = [readFileSync, out];\n";
    const messages = await messagesFor(code, 'src/supervisor/bad.ts');
    expect(messages.map((m) => [m.ruleId, m.line])).toEqual([
      ['no-restricted-imports', 1],
      ['no-restricted-imports', 2],
    ]);
    expect(messages[1]!.message).toContain('the layer rule');
  });

  it.each([
    ['src/adapters/files/ok.ts', 'node:fs'],
    ['src/adapters/apps/ok.ts', 'node:fs/promises'],
    ['src/adapters/ok.ts', 'fs'],
    ['src/supervisor/ok.ts', 'node:path'],
    ['src/supervisor/ok.ts', '../adapters/files/local-files.ts'],
    ['src/inspect/ok.ts', 'node:fs'],
    ['src/store/sqlite/ok.ts', 'node:fs'],
  ])('%s may import %s', async (file, from) => {
    expect(await rulesFor(importOf(from), file)).toEqual([]);
  });

  it('finds no file-system import in any supervisor source today', async () => {
    const results = await eslint.lintFiles(['src/supervisor/**/*.ts']);
    const fsHits = results.flatMap((r) =>
      r.messages.filter((m) => m.message.includes('does no file IO')).map((m) => `${r.filePath}:${m.line}`),
    );
    expect(fsHits).toEqual([]);
  });
});
