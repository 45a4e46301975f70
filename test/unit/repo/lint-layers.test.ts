// The layers are held by the linter: cli|server → index|supervisor → inspect → adapters|machines|store → domain.
// Prove the import rule fires where a layer reaches up or past its neighbour, and stays quiet where it may.
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const eslint = new ESLint({ cwd: process.cwd() });
const rulesFor = async (code: string, filePath: string) => (await eslint.lintText(code, { filePath }))[0]!.messages.map((m) => m.ruleId);
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
