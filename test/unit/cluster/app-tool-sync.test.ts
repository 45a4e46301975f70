// `cap` changes on a cluster, the pure parts and the node-side sync with fakes: what an instance lacks of the app's
// recorded words (nothing when it has them), what a change has reached (read from the log alone), and a node that
// brings only the instances it owns, once, tagging each event with the app event it carries out.
import { describe, expect, it } from 'vitest';
import type { DispatchResult, LiveActor } from '../../../src/supervisor/host/actor-host.ts';
import { AppToolSync } from '../../../src/supervisor/instances/app-tool-sync.ts';
import { capReach, readToolLog, toolChanges, type ToolLog } from '../../../src/supervisor/instances/app-grants.ts';
import { FencedError } from '../../../src/domain/errors.ts';
import type { RecordedEvent } from '../../../src/domain/events.ts';

const APP = 'com.example.sync';
let seq = 0;
const ev = (
  stream: string,
  type: string,
  data: Record<string, unknown>,
  meta: Record<string, unknown> = {},
): RecordedEvent =>
  ({ seq: ++seq, stream, version: 1, type, schema: 1, data, meta, at: '2026-12-02T00:00:00.000Z' }) as RecordedEvent;

describe('toolChanges and readToolLog', () => {
  it('the last word on each tool wins, with its seq; only differing tools change; applied twice changes nothing', async () => {
    const g1 = ev(`app-${APP}`, 'app.tool-granted', { appId: APP, tool: 'git' });
    const r1 = ev(`app-${APP}`, 'app.tool-revoked', { appId: APP, tool: 'bash' });
    const g2 = ev(`app-${APP}`, 'app.tool-granted', { appId: APP, tool: 'bash' });
    const r2 = ev(`app-${APP}`, 'app.tool-revoked', { appId: APP, tool: 'curl' });
    const log = await readToolLog(
      {
        readStream: async function* () {
          yield* [g1, r1, g2, r2];
        },
      },
      APP,
    );
    expect([...log]).toEqual([
      ['git', { granted: true, seq: g1.seq }],
      ['bash', { granted: true, seq: g2.seq }],
      ['curl', { granted: false, seq: r2.seq }],
    ]);
    expect(toolChanges(['bash', 'curl', 'node'], log)).toEqual([
      { tool: 'git', granted: true, seq: g1.seq },
      { tool: 'curl', granted: false, seq: r2.seq },
    ]);
    expect(toolChanges(['bash', 'node', 'git'], log)).toEqual([]);
    expect(toolChanges([], new Map())).toEqual([]);
  });
});

describe('capReach', () => {
  it('changed = an event with meta.cap = seq (by its node); pending = still differing; others are not listed', () => {
    const s = 42;
    const r = capReach(
      [
        {
          instanceId: 'i1',
          tools: ['git'],
          events: [ev('instance-i1', 'instance.tool-granted', { tool: 'git' }, { cap: s, node: 'b' })],
          owner: 'b',
        },
        { instanceId: 'i2', tools: [], events: [], owner: 'c' },
        {
          instanceId: 'i3',
          tools: ['git'],
          events: [ev('instance-i3', 'instance.tool-granted', { tool: 'git' }, { cap: 7, node: 'a' })],
          owner: 'a',
        },
        { instanceId: 'i4', tools: null, events: [], owner: 'a' },
        {
          instanceId: 'i5',
          tools: ['git'],
          events: [ev('instance-i5', 'instance.tool-granted', { tool: 'git' }, { cap: s })],
          owner: null,
        },
      ],
      'git',
      true,
      s,
      'here',
    );
    expect(r).toEqual({
      changed: [
        { instanceId: 'i1', node: 'b' },
        { instanceId: 'i5', node: 'here' },
      ],
      pending: [{ instanceId: 'i2', node: 'c' }],
    });
    // A revocation: an instance that has the tool is pending, one without it is not.
    expect(
      capReach(
        [
          { instanceId: 'i1', tools: ['git'], events: [], owner: 'b' },
          { instanceId: 'i2', tools: [], events: [], owner: 'b' },
        ],
        'git',
        false,
        9,
        'a',
      ).pending,
    ).toEqual([{ instanceId: 'i1', node: 'b' }]);
  });
});

/** A node's view with fakes: its live instances (tools folded as events are dispatched) and the app's log. */
function node(opts: {
  owned: string[];
  instances: Record<string, string[]>;
  appLog: RecordedEvent[];
  fenced?: string[];
}) {
  const actors = new Map<string, LiveActor>();
  const add = (id: string, tools: string[]) =>
    void actors.set(id, {
      id,
      kind: 'instance',
      stream: `instance-${id}`,
      version: 1,
      createdAt: '',
      snapshot: { context: { spec: { appId: APP, tools } }, value: 'running', status: 'active' } as never,
    });
  for (const [id, tools] of Object.entries(opts.instances)) add(id, tools);
  const dispatched: { id: string; type: string; tool: string; meta: Record<string, unknown> }[] = [];
  const handlers: ((e: RecordedEvent) => void | Promise<void>)[] = [];
  const sync = new AppToolSync({
    store: {
      async *readStream(s) {
        yield* s === `app-${APP}` ? opts.appLog : [];
      },
      lastSeq: async () => 0,
      subscribe: (_o, h) => (handlers.push(h), { position: 0, close: async () => undefined }),
    },
    live: () => [...actors.values()],
    owns: (s) => opts.owned.includes(s.replace('instance-', '')),
    log: () => undefined,
    async dispatch(id, e): Promise<DispatchResult> {
      await new Promise((r) => setTimeout(r, 1)); // an append takes a while: a second sync starting meanwhile must wait
      if (opts.fenced?.includes(id)) throw new FencedError(`instance-${id}`, 'b');
      dispatched.push({ id, type: e.type, tool: e.data.tool, meta: e.meta });
      const a = actors.get(id)!;
      const spec = (a.snapshot.context as { spec: { tools: string[] } }).spec;
      spec.tools =
        e.type === 'instance.tool-granted' ? [...spec.tools, e.data.tool] : spec.tools.filter((t) => t !== e.data.tool);
      return { accepted: true } as DispatchResult;
    },
  });
  return { sync, dispatched, add, feed: (e: RecordedEvent) => handlers.forEach((h) => void h(e)) };
}

describe('AppToolSync', () => {
  it('brings only the instances this node owns, once, even when two looks overlap; each event names its app event', async () => {
    const grant = ev(`app-${APP}`, 'app.tool-granted', { appId: APP, tool: 'git' });
    const n = node({
      owned: ['a1', 'a2'],
      instances: { a1: ['bash'], a2: ['bash', 'git'], b1: ['bash'] },
      appLog: [grant],
    });
    await n.sync.start();
    n.feed(grant); // the node sees the change in the log…
    const [x, y] = await Promise.all([n.sync.syncApp(APP), n.sync.syncAll()]); // … while the call and a takeover look too
    expect(n.dispatched).toEqual([{ id: 'a1', type: 'instance.tool-granted', tool: 'git', meta: { cap: grant.seq } }]);
    expect([...x, ...y].length).toBeLessThanOrEqual(1);
    expect(await n.sync.syncStreams(['instance-a1', 'instance-b1'])).toEqual([]);
    await n.sync.stop();
  });

  it('a lease lost meanwhile (FENCED) stops that instance, not the others; the new owner applies it', async () => {
    const revoke = ev(`app-${APP}`, 'app.tool-revoked', { appId: APP, tool: 'bash' });
    const n = node({
      owned: ['a1', 'a2'],
      instances: { a1: ['bash'], a2: ['bash'] },
      appLog: [revoke],
      fenced: ['a1'],
    });
    expect(await n.sync.syncApp(APP)).toEqual([{ instanceId: 'a2', tool: 'bash', granted: false, seq: revoke.seq }]);
    expect(n.dispatched.map((d) => d.id)).toEqual(['a2']);
  });

  it('a change read while a spawn was on its way (not yet live here) reaches the new instance once it is spawned, once', async () => {
    const grant = ev(`app-${APP}`, 'app.tool-granted', { appId: APP, tool: 'git' });
    const n = node({ owned: ['a1', 'a2'], instances: { a1: ['bash'] }, appLog: [grant] });
    await n.sync.start();
    n.feed(grant); // seen before a2's first event committed: a2 is not live here yet
    await n.sync.syncApp(APP);
    expect(n.dispatched.map((d) => d.id)).toEqual(['a1']);
    // a2's first event commits with the tools its spawn prepared before the grant was recorded: no git.
    n.add('a2', ['bash']);
    expect(await n.sync.spawned('instance-a2')).toEqual([
      { instanceId: 'a2', tool: 'git', granted: true, seq: grant.seq },
    ]);
    expect(await n.sync.spawned('instance-a2')).toEqual([]); // asked again: nothing left
    expect(n.dispatched.filter((d) => d.id === 'a2')).toEqual([
      { id: 'a2', type: 'instance.tool-granted', tool: 'git', meta: { cap: grant.seq } },
    ]);
    await n.sync.stop();
  });

  it('a change of another app changes nothing here', async () => {
    const log: ToolLog = new Map();
    expect(toolChanges(['git'], log)).toEqual([]);
    const n = node({
      owned: ['a1'],
      instances: { a1: ['bash'] },
      appLog: [ev(`app-${APP}`, 'app.tool-granted', { appId: APP, tool: 'git' })],
    });
    expect(await n.sync.syncApp('com.example.other')).toEqual([]);
    expect(n.dispatched).toEqual([]);
  });
});

describe('capSummary (the CLI line)', () => {
  it('says which node changed which instance, and what is recorded but not applied yet', async () => {
    const { capSummary } = await import('../../../src/cli/commands/supervise-commands.ts');
    const view = { appId: APP, tool: 'git', granted: true, tools: ['git'], seq: 9 };
    expect(
      capSummary({
        ...view,
        instances: ['i1', 'i2', 'i3'],
        changed: [
          { instanceId: 'i1', node: 'a' },
          { instanceId: 'i2', node: 'b' },
          { instanceId: 'i3', node: 'a' },
        ],
        pending: [{ instanceId: 'i4', node: 'c' }],
      }),
    ).toBe(
      '3 running instances changed (i1, i3 on a; i2 on b); 1 not yet (i4 on c): ' +
        'recorded, their owner applies it (or the node that takes them over)',
    );
    expect(capSummary({ ...view, instances: [], changed: [], pending: [] })).toBe('no running instance changed');
  });
});
