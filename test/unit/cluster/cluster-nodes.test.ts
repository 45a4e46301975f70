// The nodes view (domain/cluster-nodes.ts): live is the heartbeat rule ps uses (not stopped, fewer than three
// beats missed); a lease's expiry is the server's judgement; live actors without a lease are named. On SQLite,
// `runlog nodes` shows the one supervisor's heartbeat and no leases.
import { describe, expect, it } from 'vitest';
import { nodesView, type ClusterRecords } from '../../../src/domain/cluster-nodes.ts';
import { leaseOf, nodeLoads, readNodes } from '../../../src/supervisor/cluster/nodes.ts';
import { MemoryEventStore } from '../../../src/store/memory/event-store.ts';
import { SqliteEventStore } from '../../../src/store/sqlite/event-store.ts';
import { runCli } from '../../support/cli-in-process.ts';
import { tempDir } from '../../support/tmp.ts';
import { join } from 'node:path';

const NOW = '2026-12-01T12:00:10.000Z';
const beat = (node: string, beatAt: string, stoppedAt: string | null = null) => ({
  node,
  pid: 100,
  host: `host-${node}`,
  startedAt: '2026-12-01T11:00:00.000Z',
  beatAt,
  intervalMs: 1000,
  stoppedAt,
});

describe('nodesView', () => {
  const records: ClusterRecords = {
    nodes: [
      beat('b', '2026-12-01T12:00:09.500Z'),
      beat('a', '2026-12-01T12:00:06.000Z'),
      beat('c', '2026-12-01T12:00:09.900Z', '2026-12-01T12:00:09.900Z'),
    ],
    leases: [
      { stream: 'instance-y', node: 'b', token: 7, expiresAt: '2026-12-01T12:00:13.000Z', expiresInMs: 3000 },
      { stream: 'instance-x', node: 'b', token: 5, expiresAt: '2026-12-01T12:00:12.000Z', expiresInMs: 2000 },
      { stream: 'execution-e', node: 'a', token: 3, expiresAt: '2026-12-01T12:00:08.000Z', expiresInMs: -2000 },
      { stream: 'instance-z', node: 'ghost', token: 9, expiresAt: '2026-12-01T12:00:13.000Z', expiresInMs: 3000 },
    ],
  };
  const states: Record<string, string> = {
    'instance-x': 'running',
    'instance-y': 'starting',
    'execution-e': 'running',
  };
  const live = [
    { stream: 'instance-x', id: 'x', kind: 'instance', state: 'running' },
    { stream: 'instance-w', id: 'w', kind: 'instance', state: 'running' },
  ];
  const view = nodesView(records, NOW, { state: (s) => states[s] ?? null, live });

  it('live nodes first; live means beating (a stopped node and one that missed three beats are not)', () => {
    expect(view.nodes.map((n) => [n.node, n.live])).toEqual([
      ['b', true],
      ['a', false],
      ['c', false],
      ['ghost', false],
    ]);
    expect(view.nodes.find((n) => n.node === 'a')!.ageMs).toBe(4000);
    expect(view.nodes.find((n) => n.node === 'c')!.stoppedAt).toBe('2026-12-01T12:00:09.900Z');
  });

  it("each node's leases, sorted, with the actor's state and the server's expiry", () => {
    expect(view.nodes[0]!.owns).toEqual([
      {
        id: 'x',
        kind: 'instance',
        state: 'running',
        token: 5,
        expiresAt: '2026-12-01T12:00:12.000Z',
        expiresInMs: 2000,
        expired: false,
      },
      {
        id: 'y',
        kind: 'instance',
        state: 'starting',
        token: 7,
        expiresAt: '2026-12-01T12:00:13.000Z',
        expiresInMs: 3000,
        expired: false,
      },
    ]);
    expect(view.nodes.find((n) => n.node === 'a')!.owns).toEqual([
      expect.objectContaining({ id: 'e', kind: 'execution', expired: true }),
    ]);
    // A lease holder with no heartbeat row is shown (not hidden), as not live.
    expect(view.nodes.find((n) => n.node === 'ghost')).toMatchObject({
      host: null,
      beatAt: null,
      ageMs: null,
      owns: [expect.objectContaining({ id: 'z', state: null })],
    });
  });

  it('names live actors no node owns', () => {
    expect(view.unowned).toEqual([{ id: 'w', kind: 'instance', state: 'running' }]);
    expect(view.cluster).toBe(true);
  });

  it(
    "placement's view of the same records: " +
      "each beating node's liveness on the server's clock and its live leases; who holds a lease",
    () => {
      expect(nodeLoads({ ...records, at: NOW })).toEqual([
        // its one lease has expired
        { node: 'a', live: false, beatAt: '2026-12-01T12:00:06.000Z', stoppedAt: null, instances: 0, executions: 0 },
        { node: 'b', live: true, beatAt: '2026-12-01T12:00:09.500Z', stoppedAt: null, instances: 2, executions: 0 },
        {
          node: 'c',
          live: false,
          beatAt: '2026-12-01T12:00:09.900Z',
          stoppedAt: '2026-12-01T12:00:09.900Z',
          instances: 0,
          executions: 0,
        },
      ]);
      // Judged on the server's time, not the reader's: a second later on the server, b has missed no beat yet.
      expect(nodeLoads({ ...records, at: '2026-12-01T12:00:12.500Z' }).find((n) => n.node === 'b')!.live).toBe(true);
      expect(nodeLoads({ ...records, at: '2026-12-01T12:00:12.501Z' }).find((n) => n.node === 'b')!.live).toBe(false);
      expect(leaseOf(records, 'execution-e')).toEqual({ node: 'a', expiresInMs: -2000 });
      expect(leaseOf(records, 'instance-w')).toBeNull();
    },
  );

  it("readNodes reads each leased actor's state from the log's actors and the records from the cluster", async () => {
    const store = new MemoryEventStore();
    const row = (id: string, state: string, status: 'active' | 'terminal') => ({
      id,
      kind: 'instance',
      stream: `instance-${id}`,
      state,
      status,
      version: 1,
      createdAt: NOW,
      updatedAt: NOW,
      summary: {},
    });
    await store.appendMany([
      {
        stream: 'instance-x',
        events: [{ type: 'instance.requested', data: {} }],
        expectedVersion: 'no-stream',
        row: row('x', 'running', 'active'),
      },
      {
        stream: 'instance-y',
        events: [{ type: 'instance.requested', data: {} }],
        expectedVersion: 'no-stream',
        row: row('y', 'stopped', 'terminal'),
      },
    ]);
    const v = await readNodes(
      store,
      { clusterRecords: async () => ({ ...records, at: NOW }) },
      '2030-01-01T00:00:00.000Z',
    );
    expect(v.at).toBe(NOW); // the server's time, not the reader's
    expect(v.nodes.find((n) => n.node === 'b')!.owns.map((o) => [o.id, o.state])).toEqual([
      ['x', 'running'],
      ['y', 'stopped'],
    ]);
    expect(v.unowned).toEqual([]);
  });
});

describe('runlog nodes on SQLite', () => {
  it('shows the one supervisor from its heartbeat, no leases', async () => {
    const home = tempDir();
    const db = join(home, 'runlog.db');
    const store = new SqliteEventStore(db);
    const at = new Date().toISOString();
    store.writeHeartbeat({ node: 'solo', pid: 4242, startedAt: at, beatAt: at, intervalMs: 5000, stoppedAt: null });
    store.close();
    const r = await runCli(['nodes', '--json', '--db', db]);
    expect(r.code, r.stderr()).toBe(0);
    const view = JSON.parse(r.stdout());
    expect(view).toMatchObject({
      cluster: false,
      unowned: [],
      nodes: [{ node: 'solo', pid: 4242, host: null, live: true, owns: [] }],
    });
    const t = await runCli(['nodes', '--db', db]);
    expect(t.stdout()).toMatch(/solo\s+live\s+-\s+4242/);
  });

  it('says so when no supervisor ever ran', async () => {
    const home = tempDir();
    const db = join(home, 'runlog.db');
    new SqliteEventStore(db).close();
    const r = await runCli(['nodes', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.stderr()).toContain('no supervisor has run on this log');
  });
});
