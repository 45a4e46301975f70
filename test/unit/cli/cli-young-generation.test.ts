// The CLI's streaming commands keep V8's young generation small when they run as their own process, and only then.
import { describe, expect, it, vi } from 'vitest';

const tuned = vi.hoisted(() => ({ calls: 0 }));
vi.mock('../../../src/cli/young-generation.ts', () => ({ keepYoungGenerationSmall: () => void (tuned.calls += 1) }));

const { main } = await import('../../../src/cli/main.ts');
const { commands } = await import('../../../src/cli/main.ts');
const { capture } = await import('../../support/cli-in-process.ts');
const { tempDir } = await import('../../support/tmp.ts');
const { createRunlog } = await import('../../../src/supervisor/runlog.ts');

/** A log with nothing in it yet, closed: what the commands read. */
async function emptyLog(): Promise<string> {
  const home = tempDir();
  await (await createRunlog({ home, supervise: false, readOnly: false })).close();
  return `${home}/runlog.db`;
}

describe("the CLI's heap for streaming commands", () => {
  it('events, replay and export are the commands that stream, and no other command claims to', () => {
    expect(
      commands
        .filter((c) => c.streams)
        .map((c) => c.name)
        .sort(),
    ).toEqual(['events', 'export', 'replay']);
  });

  it(
    'a streaming command run as its own process keeps the young ' +
      'generation small; run in-process by a host it leaves the heap alone',
    async () => {
      const db = await emptyLog();
      tuned.calls = 0;
      expect(await main(['events', '--all', '--json', '--db', db], capture().factory)).toBe(0);
      expect(tuned.calls).toBe(0);
      expect(await main(['events', '--all', '--json', '--db', db], capture().factory, { ownProcess: true })).toBe(0);
      expect(tuned.calls).toBe(1);
    },
  );

  it('a command that does not stream leaves the heap alone even as its own process', async () => {
    tuned.calls = 0;
    expect(await main(['ps', '--db', await emptyLog()], capture().factory, { ownProcess: true })).toBe(0);
    expect(await main(['--version'], capture().factory, { ownProcess: true })).toBe(0);
    expect(tuned.calls).toBe(0);
  });
});
