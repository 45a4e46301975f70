// Snapshots and `runlog verify` on PostgreSQL, against the real server (`npm run setup`), a schema per test:
// actors written through the real host and store keep their snapshots in PostgreSQL, a supervisor's start-up
// reads the snapshot and folds only the tail, and `runlog verify --store` checks the chain, the snapshots (newest
// and older) and the projection, naming what is damaged.
import { afterAll, describe, expect, it } from 'vitest';
import { createRunlog, type Runlog } from '../../../src/supervisor/runlog.ts';
import { sealSnapshot, SNAPSHOT_EVERY } from '../../../src/inspect/snapshots.ts';
import type { InstanceSpec } from '../../../src/machines/instance.machine.ts';
import { runCli } from '../../support/cli-in-process.ts';
import { testSchema, usePostgres } from '../../support/postgres.ts';
import { tempDir } from '../../support/tmp.ts';
import { runlogInternals } from '../../../src/supervisor/runlog-internals.ts';

const db = usePostgres();
const open: Runlog[] = [];
afterAll(async () => {
  for (const rl of open) await rl.close().catch(() => undefined);
});

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

/** A log on PostgreSQL written by the real host: a live actor past two snapshot points, and one that ended. */
async function writeLog(store: string): Promise<void> {
  const rl = await createRunlog({ home: tempDir(), store, supervise: false, readOnly: false });
  try {
    await runlogInternals(rl).host.create('instance', 'inst_live', {
      type: 'instance.requested',
      data: { spec: spec('inst_live') },
    });
    for (let i = 0; i < 2 * SNAPSHOT_EVERY + 5; i++)
      await rl.send('instance', 'inst_live', { type: 'instance.tool-granted', data: { tool: `t${i}` } });
    await runlogInternals(rl).host.create('instance', 'inst_done', {
      type: 'instance.requested',
      data: { spec: spec('inst_done') },
    });
    await rl.send('instance', 'inst_done', { type: 'instance.stop-requested', data: {} });
    await rl.send('instance', 'inst_done', { type: 'instance.exited', data: { exitCode: 0 } });
  } finally {
    await rl.close();
  }
}

async function verify(store: string): Promise<{ code: number; report: any }> {
  const r = await runCli(['verify', '--store', store, '--json']);
  return { code: r.code, report: JSON.parse(r.stdout()) };
}

describe('snapshots and verify on PostgreSQL', () => {
  it('snapshots are kept in PostgreSQL (newest and older); a sound log verifies, exit 0', async () => {
    const schema = testSchema('verify');
    const store = `${db.url}?schema=${schema}`;
    await writeLog(store);
    const { rows } = await db.admin.query(`SELECT stream, version FROM ${schema}.snapshots ORDER BY stream`);
    expect(rows).toEqual([
      { stream: 'instance-inst_done', version: 3 },
      { stream: 'instance-inst_live', version: 2 * SNAPSHOT_EVERY },
    ]);
    expect((await db.admin.query(`SELECT stream, version FROM ${schema}.snapshot_history`)).rows).toEqual([
      { stream: 'instance-inst_live', version: SNAPSHOT_EVERY },
    ]);
    const { code, report } = await verify(store);
    expect(report).toMatchObject({
      ok: true,
      events: 2 * SNAPSHOT_EVERY + 9,
      lastSeq: 2 * SNAPSHOT_EVERY + 9,
      actors: 2,
      snapshots: 2,
      olderSnapshots: 1,
      findings: [],
    });
    expect(report.file).not.toContain(':runlog@');
    expect(code).toBe(0);
  });

  it(
    'a supervisor’s start-up reads the snapshot and folds only the tail; ' +
      'verify names the snapshot that disagrees with its events',
    async () => {
      const schema = testSchema('verifysnap');
      const store = `${db.url}?schema=${schema}`;
      await writeLog(store);
      // Proof the snapshot is what start-up reads: one (well sealed, this machine's) that says something the
      // events do not is believed for the versions it covers.
      const { rows } = await db.admin.query(`SELECT * FROM ${schema}.snapshots WHERE stream = 'instance-inst_live'`);
      const r = rows[0];
      const state = JSON.parse(r.state);
      state.context.spec.tools = ['planted'];
      const planted = sealSnapshot({
        stream: r.stream,
        version: r.version,
        fingerprint: r.fingerprint,
        createdAt: r.created_at,
        state: JSON.stringify(state),
      });
      await db.admin.query(`UPDATE ${schema}.snapshots SET state = $1, checksum = $2 WHERE stream = $3`, [
        planted.state,
        planted.checksum,
        r.stream,
      ]);

      const rl = await createRunlog({
        home: tempDir(),
        store,
        effects: { instance: {} },
        reconcile: false,
        watchApps: false,
        engineWatch: false,
        metrics: false,
        log: () => undefined,
      });
      open.push(rl);
      const tools = (
        (await runlogInternals(rl).host.fetch('instance', 'inst_live'))!.snapshot.context as {
          spec: { tools: string[] };
        }
      ).spec.tools;
      expect(tools).toEqual(['planted', 't199', 't200', 't201', 't202', 't203', 't204']);
      await rl.close();

      const { code, report } = await verify(store);
      expect(report.findings).toEqual([
        expect.objectContaining({
          code: 'SNAPSHOT_MISMATCH',
          severity: 'damage',
          stream: 'instance-inst_live',
          version: 2 * SNAPSHOT_EVERY,
        }),
      ]);
      expect(code).toBe(4);
    },
  );

  it(
    'verify names an older snapshot that disagrees with its events, ' +
      'a snapshot failing its checksum, a changed event and a projection row that disagrees',
    async () => {
      const schema = testSchema('verifydamage');
      const store = `${db.url}?schema=${schema}`;
      await writeLog(store);

      const { rows } = await db.admin.query(
        `SELECT * FROM ${schema}.snapshot_history WHERE stream = 'instance-inst_live'`,
      );
      const r = rows[0];
      const state = JSON.parse(r.state);
      state.context.spec.tools = ['planted'];
      const planted = sealSnapshot({
        stream: r.stream,
        version: r.version,
        fingerprint: r.fingerprint,
        createdAt: r.created_at,
        state: JSON.stringify(state),
      });
      await db.admin.query(`UPDATE ${schema}.snapshot_history SET state = $1, checksum = $2 WHERE stream = $3`, [
        planted.state,
        planted.checksum,
        r.stream,
      ]);
      await db.admin.query(`UPDATE ${schema}.snapshots SET state = state || ' ' WHERE stream = 'instance-inst_done'`);
      let v = await verify(store);
      expect(v.report.findings).toEqual([
        expect.objectContaining({ code: 'SNAPSHOT_CHECKSUM', severity: 'damage', stream: 'instance-inst_done' }),
        expect.objectContaining({
          code: 'SNAPSHOT_MISMATCH',
          severity: 'damage',
          stream: 'instance-inst_live',
          version: SNAPSHOT_EVERY,
          message: expect.stringContaining('older snapshot'),
        }),
      ]);
      expect(v.code).toBe(4);

      const seq = (
        await db.admin.query(
          `SELECT seq::integer FROM ${schema}.events WHERE stream = 'instance-inst_live' AND version = 50`,
        )
      ).rows[0].seq;
      await db.admin.query(`UPDATE ${schema}.events SET data = '{"tool": "tX"}' WHERE seq = $1`, [seq]);
      await db.admin.query(
        `UPDATE ${schema}.projection_documents SET doc = jsonb_set(doc, '{state}', '"running"') WHERE id = 'instance-inst_done'`,
      );
      v = await verify(store);
      expect(v.report.findings).toEqual(
        expect.arrayContaining([
          expect.objectContaining({
            code: 'STORE_CHAIN_BROKEN',
            severity: 'damage',
            seq,
            stream: 'instance-inst_live',
            version: 50,
          }),
          expect.objectContaining({ code: 'PROJECTION_MISMATCH', severity: 'damage', stream: 'instance-inst_done' }),
        ]),
      );
      expect(v.code).toBe(4);
    },
  );
});
