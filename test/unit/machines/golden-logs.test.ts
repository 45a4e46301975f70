// Golden logs (issue 15): histories written by an earlier release (test/fixtures/golden, written by
// scripts/write-golden-logs.ts) must fold, with today's machines and upcasters, to exactly the states that release
// folded them to. A failure here means a machine change would break an old history: write an upcaster or keep
// the old behaviour; never regenerate the fixtures to make it pass.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readHistoryFile } from '../../../src/inspect/history-file.ts';
import { replayHistory } from '../../../src/cli/replay-stepper.ts';
import { expectSnapshotPlusTailEqualsFold } from '../../support/snapshot-property.ts';

const DIR = join(import.meta.dirname, '../../fixtures', 'golden');
const expected = JSON.parse(readFileSync(join(DIR, 'expected.json'), 'utf8')) as Record<
  string,
  { release: string; states: string[]; state: string; context: unknown }
>;
const files = readdirSync(DIR)
  .filter((f) => f.endsWith('.jsonl'))
  .sort();

describe('golden logs fold to the states their release recorded', () => {
  it('covers an instance that crashed and restarted, an adoption, and an execution of each outcome', () => {
    expect(files.map((f) => f.replace('.jsonl', ''))).toEqual(Object.keys(expected).sort());
    expect(files).toEqual(
      expect.arrayContaining([
        'instance-crashed-restarted.jsonl',
        'instance-adopted.jsonl',
        'execution-succeeded.jsonl',
        'execution-adopted.jsonl',
      ]),
    );
    for (const reason of ['resolution', 'validation', 'materialization', 'runtime', 'timeout', 'cancelled', 'lost'])
      expect(files).toContain(`execution-failed-${reason}.jsonl`);
  });

  it.each(files)('%s', (file) => {
    const name = file.replace('.jsonl', '');
    const want = expected[name]!;
    const view = replayHistory(readHistoryFile(join(DIR, file)));
    expect(
      view.steps.map((s) => `${s.to}${s.accepted ? '' : ' (rejected)'}`),
      `${name} (written by release ${want.release}): state after each version`,
    ).toEqual(want.states);
    expect(view.state).toBe(want.state);
    // Every value the release recorded, unchanged; a field a later machine added (with its default) is allowed,
    // a changed or removed one is not.
    expect(view.context).toMatchObject(want.context as Record<string, unknown>);
  });

  it('snapshot + tail = the full fold at every version of every golden log', async () => {
    const histories = files.map((f) => readHistoryFile(join(DIR, f)));
    // The golden logs as a store that keeps no snapshots: every cut is one the property makes itself.
    const store = {
      listStreams: async () =>
        histories.map((h) => ({
          stream: h.header.stream,
          kind: h.header.kind,
          version: h.header.version,
          createdAt: '',
          updatedAt: '',
        })),
      async *readStream(stream: string) {
        yield* histories.find((h) => h.header.stream === stream)!.events;
      },
      snapshotAtOrBefore: async () => undefined,
    };
    expect(await expectSnapshotPlusTailEqualsFold(store)).toBe(histories.reduce((n, h) => n + h.events.length, 0));
  });
});
