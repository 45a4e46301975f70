// Snapshots are a cache (issue 15): written every SNAPSHOT_EVERY events and at terminal states, read by start-up
// and inspect (which then fold only the tail), ignored when stale, damaged or gone, and never the truth.
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { inspectActor, rebuildSnapshots } from '../../../src/inspect/inspection.ts';
import { createRunlog } from '../../../src/supervisor/runlog.ts';
import { machineFingerprint, sealSnapshot, SNAPSHOT_EVERY } from '../../../src/inspect/snapshots.ts';
import { verifyLog } from '../../../src/inspect/verify-log.ts';
import { main } from '../../../src/cli/main.ts';
import type { Io } from '../../../src/cli/output.ts';
import { instanceMachine, type InstanceSpec } from '../../../src/machines/instance.machine.ts';
import { SqlitePortStore } from '../../../src/store/sqlite/port-adapter.ts';
import { expectSnapshotPlusTailEqualsFold } from '../../support/snapshot-property.ts';
import { tempDir } from '../../support/tmp.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const spec = (id: string): InstanceSpec => ({
  instanceId: id,
  appId: 'com.example.hello',
  appDir: '/apps/hello',
  sandbox: 'proot',
  runtime: 'raw',
  tools: [],
  lifecycleBasePath: '',
  restart: { policy: 'on-failure', maxRestarts: 3, backoffMs: 10, maxBackoffMs: 20, resetAfterMs: 1000 },
});

const io = (): { factory: (json: boolean) => Io; stdout: () => string } => {
  const out: string[] = [];
  return { factory: (json) => ({ out: (t) => out.push(t), err: () => undefined, json }), stdout: () => out.join('\n') };
};

/** Deterministic pseudo-random numbers (a test that fails can be run again). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const INSTANCE_EVENTS: [string, Record<string, unknown>][] = [
  ['instance.spawned', { pid: 4242, host: '127.0.0.1', port: 4100 }],
  ['instance.healthy', { identity: 'match' }],
  ['instance.running', {}],
  ['instance.crashed', { reason: 'exit', exitCode: 1, message: 'boom' }],
  ['instance.restart-scheduled', { dueAt: '2026-01-01T00:00:10.000Z' }],
  ['instance.restart-due', {}],
  ['instance.exited', { exitCode: 0 }],
  ['instance.stop-requested', { graceMs: null }],
  ['instance.tool-granted', { tool: 'git' }],
  ['instance.tool-revoked', { tool: 'git' }],
  ['instance.lost', { reason: 'container gone' }],
  ['instance.adopted', { containerId: 'c0ffee', host: '127.0.0.1', port: 4101 }],
  ['instance.pause-requested', {}],
  ['instance.resume-requested', {}],
];
const EXECUTION_EVENTS: [string, Record<string, unknown>][] = [
  ['execution.step', { name: 'resolve', detail: { n: 1 } }],
  ['execution.resolved', { codeCid: 'bafycode', runtimeCid: 'bafyrt' }],
  ['execution.materialized', { volume: 'v1' }],
  ['execution.started', { containerId: 'c1' }],
  ['execution.succeeded', { output: { greeting: 'hi' }, outputHash: 'h' }],
  ['execution.failed', { reason: 'runtime', code: 'E', message: 'no' }],
  ['execution.adopted', { containerId: 'c2' }],
  ['execution.cancel-requested', {}],
];

/** A log written by the host (real machines, real store, no effects): random walks, many rejected events. */
async function randomLog(home: string, seed: number, actors: number, length: () => number) {
  const rl = await createRunlog({ home, supervise: false, readOnly: false });
  const r = rng(seed);
  let t = Date.parse('2026-01-01T00:00:00.000Z');
  const at = () => new Date((t += 1000)).toISOString();
  for (let a = 0; a < actors; a++) {
    const exec = a % 3 === 2;
    const id = exec ? `exec_${a}` : `inst_${a}`;
    if (exec) {
      await runlogInternals(rl).host.create('execution', id, {
        type: 'execution.requested',
        at: at(),
        data: {
          request: {
            executionId: id,
            uri: 'at://did:plc:x/c/1',
            handler: 'h',
            input: {},
            callerDid: null,
            timeoutMs: 1000,
          },
          deadline: '2026-01-02T00:00:00.000Z',
        },
      });
    } else {
      await runlogInternals(rl).host.create('instance', id, {
        type: 'instance.requested',
        at: at(),
        data: { spec: spec(id) },
      });
    }
    const pool = exec ? EXECUTION_EVENTS : INSTANCE_EVENTS;
    const n = length();
    for (let i = 0; i < n; i++) {
      const [type, data] = pool[Math.floor(r() * pool.length)]!;
      // Any event of the kind, with loose data: the ones the state cannot take are recorded as rejected.
      await rl.send(exec ? 'execution' : 'instance', id, { type, at: at(), data } as never);
    }
  }
  return rl;
}

describe('snapshots', () => {
  it(`are written every ${SNAPSHOT_EVERY} events and at a terminal state, in the append's transaction`, async () => {
    const home = tempDir();
    const rl = await createRunlog({ home, supervise: false, readOnly: false });
    await runlogInternals(rl).host.create('instance', 'inst_a', {
      type: 'instance.requested',
      data: { spec: spec('inst_a') },
    });
    for (let i = 0; i < SNAPSHOT_EVERY + 20; i++)
      await rl.send('instance', 'inst_a', { type: 'instance.tool-granted', data: { tool: `t${i % 3}` } });
    expect(await runlogInternals(rl).store.snapshotAtOrBefore('instance-inst_a')).toMatchObject({
      version: SNAPSHOT_EVERY,
      fingerprint: machineFingerprint(instanceMachine),
    });
    await rl.send('instance', 'inst_a', { type: 'instance.stop-requested', data: {} });
    await rl.send('instance', 'inst_a', { type: 'instance.exited', data: { exitCode: 0 } });
    const v = await runlogInternals(rl).store.streamVersion('instance-inst_a');
    expect((await rl.inspect('inst_a')).state).toBe('stopped');
    expect(await runlogInternals(rl).store.snapshotAtOrBefore('instance-inst_a')).toMatchObject({ version: v });
    await rl.close();
    expect(await verifyLog(rl.dbPath)).toMatchObject({ ok: true, snapshots: 1, findings: [] });
  });

  it('start-up and inspect read the newest snapshot and fold only the tail', async () => {
    const home = tempDir();
    const rl = await createRunlog({ home, supervise: false, readOnly: false });
    await runlogInternals(rl).host.create('instance', 'inst_a', {
      type: 'instance.requested',
      data: { spec: spec('inst_a') },
    });
    for (let i = 0; i < SNAPSHOT_EVERY + 5; i++)
      await rl.send('instance', 'inst_a', { type: 'instance.tool-granted', data: { tool: `t${i}` } });
    await rl.close();
    // Proof the snapshot is what is read: a snapshot (well sealed, this machine's) that says something the events
    // do not is believed for the versions it covers. (verify calls this SNAPSHOT_MISMATCH.)
    const store = new SqlitePortStore(rl.dbPath);
    const real = (await store.snapshotAtOrBefore('instance-inst_a'))!;
    const state = JSON.parse(real.state);
    state.context.spec.tools = ['planted'];
    const planted = sealSnapshot({ ...real, state: JSON.stringify(state) });
    store.store.replaceSnapshots([planted]); // SQLite's own snapshot table, under the port
    expect((await inspectActor(store, 'inst_a')).context.spec).toMatchObject({
      tools: ['planted', 't99', 't100', 't101', 't102', 't103', 't104'],
    });
    await store.close();
    const rl2 = await createRunlog({
      home,
      effects: { instance: {} },
      reconcile: false,
      watchApps: false,
      engineWatch: false,
      metrics: false,
      log: () => undefined,
    });
    expect(
      (
        runlogInternals(rl2).host.get('instance', 'inst_a')!.snapshot.context as { spec: { tools: string[] } }
      ).spec.tools.slice(0, 2),
    ).toEqual(['planted', 't99']);
    await rl2.close();
    expect((await verifyLog(rl.dbPath)).findings).toEqual([
      expect.objectContaining({
        code: 'SNAPSHOT_MISMATCH',
        severity: 'damage',
        stream: 'instance-inst_a',
        version: SNAPSHOT_EVERY,
      }),
    ]);
  });

  describe('damage to a snapshot changes no answer, and verify names it', () => {
    async function logWithSnapshots() {
      const home = tempDir();
      const rl = await randomLog(home, 7, 6, () => 130);
      const truth = [];
      for (const r of await rl.list({ all: true }))
        truth.push({ ...(await inspectActor(runlogInternals(rl).store, r.id)) });
      await rl.close();
      return { db: rl.dbPath, truth };
    }
    const answers = async (db: string) => {
      const s = new SqlitePortStore(db, { readOnly: true });
      try {
        const views = [];
        for (const r of await s.listActors({ all: true })) views.push(await inspectActor(s, r.id));
        return views;
      } finally {
        await s.close();
      }
    };

    it('a deleted snapshot: SNAPSHOT_MISSING; the actor is folded from its events', async () => {
      const { db, truth } = await logWithSnapshots();
      const raw = new Database(db);
      expect(raw.prepare("DELETE FROM snapshots WHERE stream = 'instance-inst_0'").run().changes).toBe(1);
      raw.close();
      expect(await answers(db)).toEqual(truth);
      const r = await verifyLog(db);
      expect(r.ok).toBe(false);
      expect(r.findings).toEqual([
        expect.objectContaining({ code: 'SNAPSHOT_MISSING', severity: 'damage', stream: 'instance-inst_0' }),
      ]);
      const c = io();
      expect(await main(['verify', '--db', db], c.factory)).toBe(4);
      expect(c.stdout()).toMatch(/DAMAGE SNAPSHOT_MISSING: instance-inst_0: its snapshot at v\d+ is gone/);
    });

    it('a snapshot of an old machine: SNAPSHOT_STALE (a warning), ignored', async () => {
      const { db, truth } = await logWithSnapshots();
      const raw = new Database(db);
      const row = raw.prepare("SELECT * FROM snapshots WHERE stream = 'instance-inst_1'").get() as Record<
        string,
        string
      >;
      // What an older release would have written: its own fingerprint, and a state this release would not reach.
      const state = JSON.parse(row.state!);
      state.value = 'running';
      const stale = sealSnapshot({
        stream: row.stream!,
        version: Number(row.version),
        fingerprint: 'f'.repeat(32),
        createdAt: row.created_at!,
        state: JSON.stringify(state),
      });
      raw
        .prepare('UPDATE snapshots SET fingerprint = ?, state = ?, checksum = ? WHERE stream = ?')
        .run(stale.fingerprint, stale.state, stale.checksum, stale.stream);
      raw.close();
      expect(await answers(db)).toEqual(truth);
      const r = await verifyLog(db);
      expect(r.ok).toBe(true);
      expect(r.findings).toEqual([
        expect.objectContaining({ code: 'SNAPSHOT_STALE', severity: 'warning', stream: 'instance-inst_1' }),
      ]);
      // rebuild --snapshots makes this machine's again.
      const c = io();
      expect(await main(['rebuild', '--snapshots', '--db', db], c.factory)).toBe(0);
      expect(c.stdout()).toMatch(/^rebuilt 6 snapshots from \d+ events$/);
      expect(await verifyLog(db)).toMatchObject({ ok: true, snapshots: 6, findings: [] });
    });

    it('a snapshot that fails its checksum: SNAPSHOT_CHECKSUM, ignored', async () => {
      const { db, truth } = await logWithSnapshots();
      const raw = new Database(db);
      raw
        .prepare(
          "UPDATE snapshots SET state = replace(state, '\"restarts\":', '\"restarts\": ') WHERE stream = 'instance-inst_3'",
        )
        .run();
      raw.close();
      expect(await answers(db)).toEqual(truth);
      expect((await verifyLog(db)).findings).toEqual([
        expect.objectContaining({ code: 'SNAPSHOT_CHECKSUM', severity: 'damage', stream: 'instance-inst_3' }),
      ]);
    });

    it(
      'an older snapshot (replay --to reads it) that disagrees with its events: ' +
        'SNAPSHOT_MISMATCH naming it; one failing its checksum: SNAPSHOT_CHECKSUM',
      async () => {
        const { db } = await logWithSnapshots();
        const raw = new Database(db);
        const older = raw.prepare('SELECT * FROM snapshot_history ORDER BY stream, version').all() as Record<
          string,
          string
        >[];
        expect(older.length).toBeGreaterThan(1);
        expect(await verifyLog(db)).toMatchObject({ ok: true, olderSnapshots: older.length, findings: [] });
        const [a, b] = older as [Record<string, string>, Record<string, string>];
        const state = JSON.parse(a.state!);
        state.context = { ...state.context, planted: true };
        const planted = sealSnapshot({
          stream: a.stream!,
          version: Number(a.version),
          fingerprint: a.fingerprint!,
          createdAt: a.created_at!,
          state: JSON.stringify(state),
        });
        raw
          .prepare('UPDATE snapshot_history SET state = ?, checksum = ? WHERE stream = ? AND version = ?')
          .run(planted.state, planted.checksum, a.stream, a.version);
        raw
          .prepare("UPDATE snapshot_history SET state = state || ' ' WHERE stream = ? AND version = ?")
          .run(b.stream, b.version);
        raw.close();
        const r = await verifyLog(db);
        expect(r.ok).toBe(false);
        expect(r.findings).toEqual(
          expect.arrayContaining([
            expect.objectContaining({
              code: 'SNAPSHOT_MISMATCH',
              severity: 'damage',
              stream: a.stream,
              version: Number(a.version),
              message: expect.stringContaining('older snapshot'),
            }),
            expect.objectContaining({
              code: 'SNAPSHOT_CHECKSUM',
              severity: 'damage',
              stream: b.stream,
              version: Number(b.version),
              message: expect.stringContaining('older snapshot'),
            }),
          ]),
        );
        expect(r.findings).toHaveLength(2);
      },
    );

    it('every snapshot deleted: the same answers; rebuild --snapshots puts them back', async () => {
      const { db, truth } = await logWithSnapshots();
      const raw = new Database(db);
      raw.prepare('DELETE FROM snapshots').run();
      raw.prepare('UPDATE actors SET snapshot_version = NULL').run();
      raw.close();
      expect(await answers(db)).toEqual(truth);
      expect(await verifyLog(db)).toMatchObject({ ok: true, snapshots: 0 });
      const s = new SqlitePortStore(db);
      expect((await rebuildSnapshots(s, s.store)).snapshots).toBe(6);
      await s.close();
      expect(await answers(db)).toEqual(truth);
      expect(await verifyLog(db)).toMatchObject({ ok: true, snapshots: 6, findings: [] });
    });
  });

  it('property: snapshot + tail = the full fold, for every actor and version of generated logs', async () => {
    for (const seed of [1, 2, 3]) {
      const r = rng(seed * 101);
      const rl = await randomLog(tempDir(), seed, 9, () => Math.floor(r() * 60));
      await rl.close();
      // The property reads the log's snapshots, newest and older, as stored.
      const s = new SqlitePortStore(rl.dbPath, { readOnly: true });
      try {
        expect(await expectSnapshotPlusTailEqualsFold(s)).toBeGreaterThan(50);
      } finally {
        await s.close();
      }
    }
  });

  it('the fingerprint changes with the machine definition (a changed guard), not with nothing', () => {
    expect(machineFingerprint(instanceMachine.provide({}))).toBe(machineFingerprint(instanceMachine));
    const changed = instanceMachine.provide({ guards: { restartPlanned: () => false } } as never);
    expect(machineFingerprint(changed)).not.toBe(machineFingerprint(instanceMachine));
  });
});
