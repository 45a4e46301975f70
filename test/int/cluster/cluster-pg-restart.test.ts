// PostgreSQL restarting under a cluster: a throwaway PostgreSQL cluster of this test's own (support/pg-cluster.ts,
// never the shared server), two real supervisors (`runlog serve --store … --node a|b`) each with a live PRoot app.
// The server is stopped (pg_ctl stop -m fast, then -m immediate: no shutdown checkpoint, crash recovery at the
// next start) and started again. While it is down: a spawn is refused with a typed error (STORE_UNAVAILABLE) and
// leaves nothing behind, `ps` says the same, and an app that crashes meanwhile is not forgotten. Afterwards: both
// supervisors are still there and answer; heartbeats and leases resume (same owners, no takeover); the crash is
// recorded once and the app runs again (once); a new spawn works; the log is consistent — positions gapless,
// every stream's versions gapless, no event twice, and the actors projection equals a fold of the events.
//
// Mid-burst: three supervisors, requests (container spawns, executions in Docker) arriving every 150 ms through
// their APIs while the server is restarted (pg_ctl restart -m fast) and then its postmaster killed with -9 (its
// backends gone, then started again). Every supervisor stays up; every failed request is STORE_UNAVAILABLE and
// left nothing in the log; every acknowledged one is complete (running / succeeded), leased to a live node, ran
// once (one spawn, one container created — Docker's own events — or one pre-started sandbox claimed); no
// execution is in the log that nobody acknowledged; no container is left that the log does not account for.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { actorsProjection } from '../../../src/supervisor/host/actors-projection.ts';
import { publishCode } from '../../../src/supervisor/executions/publishing.ts';
import type { RecordedEvent } from '../../../src/domain/events.ts';
import { alive, HELLO_APP_DIR, requireDockerAppBase, requireProot, until } from '../../support/apps.ts';
import { cleanupClusters, createCluster, type Cluster, type ClusterNode } from '../../support/cluster-fixture.ts';
import { requireRegistry, watchContainerEvents } from '../../support/docker.ts';
import { publishNodeRuntime, startTestPds, type TestPds } from '../../support/pds.ts';
import { startThrowawayPostgres, type ThrowawayPostgres } from '../../support/pg-cluster.ts';

// Longer than any outage here: the leases must survive it (a takeover is another test's subject).
const TTL = 120_000;
const servers: ThrowawayPostgres[] = [];
let pds: TestPds | undefined;
afterAll(async () => {
  await cleanupClusters();
  for (const s of servers) s.destroy();
  await pds?.close();
});

/**
 * The log is consistent: positions gapless, each stream's versions gapless, no event twice, and the actors projection
 * equals a fold of the events.
 */
async function expectConsistentLog(cluster: Cluster): Promise<RecordedEvent[]> {
  const all = cluster.allEvents();
  expect(all.map((e) => e.seq)).toEqual(all.map((_, i) => i + 1));
  const byStream = new Map<string, RecordedEvent[]>();
  for (const e of all) byStream.set(e.stream, [...(byStream.get(e.stream) ?? []), e]);
  for (const [s, events] of byStream)
    expect(
      events.map((e) => e.version),
      s,
    ).toEqual(events.map((_, i) => i + 1));
  const fingerprints = all.map((e) => `${e.stream} ${e.type} ${e.at} ${JSON.stringify(e.data)}`);
  expect(new Set(fingerprints).size).toBe(fingerprints.length);
  const projection = actorsProjection();
  const docs = await cluster.sql<{ id: string; doc: any }>(
    "SELECT id, doc FROM projection_documents WHERE projection = 'actors' ORDER BY id",
  );
  const actorStreams = [...byStream.keys()].filter((s) => /^(instance|execution)-/.test(s)).sort();
  expect(docs.map((d) => d.id)).toEqual(actorStreams);
  for (const d of docs) {
    const folded = byStream.get(d.id)!.reduce<any>((doc, e) => projection.evolve(doc, e), null);
    const { snapshot: _s, rev: _r, ...want } = folded;
    const { snapshot: _s2, rev: _r2, ...got } = d.doc;
    expect(got, d.id).toEqual(want);
  }
  return all;
}

describe('PostgreSQL restarting under a cluster', () => {
  it(
    'pg_ctl stop -m fast, then -m immediate, and start: supervisors survive, ' +
      'appends meanwhile fail typed and lose nothing, leases and heartbeats resume, the log stays consistent',
    { timeout: 600_000 },
    async () => {
      requireProot();
      const server = startThrowawayPostgres();
      servers.push(server);
      const cluster = await createCluster({ tag: 'pgrestart', ttlMs: TTL, url: server.url });
      const { store } = cluster;
      const a = await cluster.startNode('a');
      const b = await cluster.startNode('b');
      const spawnOn = (n: ClusterNode, id: string) =>
        cluster.cli(['spawn', HELLO_APP_DIR, '--sandbox', 'proot', '--id', id, '--json'], n);
      const history = (id: string): RecordedEvent[] => {
        const r = cluster.cli(['events', id, '--json', '--store', store]);
        if (r.code !== 0) throw new Error(`events ${id}: ${r.stderr}`);
        return r.stdout
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l));
      };
      const pidOf = (id: string): number =>
        history(id)
          .filter((e) => e.type === 'instance.spawned')
          .at(-1)!.data.pid as number;
      const ia = `pa-${process.pid}`;
      const ib = `pb-${process.pid}`;
      for (const [n, id] of [
        [a, ia],
        [b, ib],
      ] as const) {
        const r = spawnOn(n, id);
        expect(r.code, r.stderr).toBe(0);
      }
      const leases = () =>
        cluster.sql<{ stream: string; node: string; token: string }>(
          'SELECT stream, node, token FROM leases WHERE stream = ANY($1) ORDER BY stream',
          [[`instance-${ia}`, `instance-${ib}`]],
        );
      const leasesBefore = await leases();
      expect(leasesBefore.map((l) => [l.stream, l.node])).toEqual([
        [`instance-${ia}`, 'a'],
        [`instance-${ib}`, 'b'],
      ]);
      const pidB = pidOf(ib);

      for (const [round, mode] of (['fast', 'immediate'] as const).entries()) {
        const pidA = pidOf(ia);
        const crashesBefore = history(ia).filter((e) => e.type === 'instance.crashed').length;
        server.stop(mode);
        // While PostgreSQL is down: a spawn is refused, typed, and leaves nothing behind.
        const refusedId = `refused${round}-${process.pid}`;
        const refused = spawnOn(a, refusedId);
        expect(refused.code, refused.stdout + refused.stderr).not.toBe(0);
        expect(refused.stdout + refused.stderr).toContain('STORE_UNAVAILABLE');
        const ps = cluster.cli(['ps', '--json', '--store', store]);
        expect(ps.code).not.toBe(0);
        expect(ps.stderr).toContain('STORE_UNAVAILABLE');
        // An app that dies meanwhile: its supervisor cannot record the crash yet, and must not forget it.
        process.kill(pidA, 'SIGKILL');
        await until(`a's app ${pidA} is gone`, () => !alive(pidA), 10_000, 50);
        await new Promise((r) => setTimeout(r, 3000));
        server.start();

        // Afterwards: the supervisors are still there, the crash is recorded once and the app runs again.
        for (const n of [a, b]) expect(n.alive(), `${n.name}: ${n.stderr().slice(-2000)}`).toBe(true);
        const after = await until(
          `the crash of ${ia} recorded and the app running again`,
          () => {
            const h = history(ia);
            return h.at(-1)?.type === 'instance.running' &&
              h.filter((e) => e.type === 'instance.crashed').length > crashesBefore
              ? h
              : null;
          },
          120_000,
          300,
        ).catch((err: Error) => {
          throw new Error(
            `${err.message}\nevents: ${JSON.stringify(history(ia).slice(-6))}\na: ${a.stderr().slice(-3000)}`,
          );
        });
        expect(after.filter((e) => e.type === 'instance.crashed')).toHaveLength(crashesBefore + 1);
        const newPid = pidOf(ia);
        expect(newPid).not.toBe(pidA);
        expect(alive(newPid)).toBe(true);
        // b's app ran through it untouched.
        expect(pidOf(ib)).toBe(pidB);
        expect(alive(pidB)).toBe(true);
        // The refused spawn left nothing: no event, no stream.
        expect(cluster.cli(['events', refusedId, '--json', '--store', store]).code).not.toBe(0);
        // Heartbeats resume (both nodes live again), leases are the same owners' with the same tokens (no takeover).
        await until(
          'both nodes beat again',
          () => {
            const v = JSON.parse(cluster.cli(['nodes', '--json', '--store', store]).stdout || '{"nodes":[]}');
            return v.nodes.length === 2 && v.nodes.every((n: any) => n.live && n.ageMs < 5000 * 2) ? v : null;
          },
          60_000,
          500,
        );
        expect(
          await leases(),
          `events: ${JSON.stringify(history(ia).slice(-8), null, 1)}\na: ${a.stderr().slice(-4000)}\nb: ${b.stderr().slice(-4000)}`,
        ).toEqual(leasesBefore);
        // A spawn works again.
        const fresh = spawnOn(b, `after${round}-${process.pid}`);
        expect(fresh.code, fresh.stderr).toBe(0);
      }

      // The log is consistent: positions gapless, each stream's versions gapless, no event twice, and the actors
      // projection equals a fold of the events.
      await expectConsistentLog(cluster);
      for (const code of await Promise.all([a, b].map((n) => n.stop()))) expect(code).toBe(0);
    },
  );

  it(
    'mid-burst: pg_ctl restart -m fast, then kill -9 of the postmaster, ' +
      'while spawns and executions (Docker) are in flight through three supervisors: ' +
      'they reconnect, every acknowledged request is complete and owned by a live node, ' +
      'every failed one is typed and left no trace, nothing ran twice, no container is unaccounted for',
    { timeout: 900_000 },
    async () => {
      await requireDockerAppBase();
      await requireRegistry();
      const server = startThrowawayPostgres();
      servers.push(server);
      const cluster = await createCluster({ tag: 'pgburst', ttlMs: TTL, url: server.url });
      pds = await startTestPds();
      const runtime = await publishNodeRuntime(pds, `pgburstrt-${process.pid}.test`);
      const author = await pds.createAccount(`pgburst-${process.pid}.test`);
      const codeDir = mkdtempSync(join(cluster.root, 'code-'));
      writeFileSync(
        join(codeDir, 'index.mjs'),
        'export async function nap(input) { await new Promise((r) => setTimeout(r, input.ms)); return { tag: input.tag }; }\n',
      );
      const uri = (
        await publishCode(author.publisher, {
          dir: codeDir,
          runtime,
          entrypoint: 'index.mjs',
          atproto: { plcUrl: pds.plcUrl },
        })
      ).uri;
      const flags = ['--plc', pds.plcUrl];
      const nodes = [
        await cluster.startNode('a', flags),
        await cluster.startNode('b', flags),
        await cluster.startNode('c', flags),
      ];
      const names = nodes.map((n) => n.name);
      // One execution first, alone: nodes on one machine share its Docker daemon, and two materializing the same code
      // volume at the same moment trip over each other's unsealed volume (README, Not done yet). Sealed once, every
      // node finds it cached, and each execution of the burst creates exactly one container.
      const first = await nodes[0]!.api('POST', '/api/executions', {
        uri,
        handler: 'nap',
        input: { ms: 10, tag: 'warm' },
        timeoutMs: 120_000,
      });
      expect(first, JSON.stringify(first.body)).toMatchObject({
        status: 200,
        body: { status: 'succeeded', output: { tag: 'warm' } },
      });
      const dockerEvents = await watchContainerEvents();
      onTestFinished(() => dockerEvents.stop());

      type Outcome = { kind: 'spawn' | 'exec'; tag: string; via: string; ok: boolean; status: number; body: any };
      const outcomes: Outcome[] = [];
      const TYPED = new Set(['STORE_UNAVAILABLE']);
      for (const fault of ['restart-fast', 'kill-9'] as const) {
        // The burst: a request every 150 ms, spawns and executions in turn, through a, b and c in turn; the fault
        // strikes after the fourth, while the first ones are still being carried out and the rest keep coming.
        const calls: Promise<void>[] = [];
        const N = 14;
        let faulted: Promise<void> = Promise.resolve();
        for (let i = 0; i < N; i++) {
          const via = nodes[i % 3]!;
          const tag = `${fault}-${i}-${process.pid}`;
          const kind = i % 2 === 0 ? 'spawn' : 'exec';
          const call =
            kind === 'spawn'
              ? via.api('POST', '/api/instances', { appDir: HELLO_APP_DIR, sandbox: 'container', instanceId: tag })
              : via.api('POST', '/api/executions', {
                  uri,
                  handler: 'nap',
                  input: { ms: 1500, tag },
                  timeoutMs: 120_000,
                });
          calls.push(
            call.then(
              (r) =>
                void outcomes.push({
                  kind,
                  tag,
                  via: via.name,
                  ok:
                    kind === 'spawn'
                      ? r.status === 201 && r.body?.state === 'running'
                      : r.status === 200 && r.body?.status === 'succeeded',
                  status: r.status,
                  body: r.body,
                }),
              (err: Error) =>
                void outcomes.push({
                  kind,
                  tag,
                  via: via.name,
                  ok: false,
                  status: 0,
                  body: { transport: err.message },
                }),
            ),
          );
          if (i === 3) {
            faulted =
              fault === 'restart-fast'
                ? server.restart('fast')
                : server.killPostmaster().then(async () => {
                    await new Promise((r) => setTimeout(r, 1500)); // down a while: requests keep arriving
                    await server.startAsync();
                  });
          }
          await new Promise((r) => setTimeout(r, 150));
        }
        await faulted;
        await Promise.all(calls);
        // The supervisors survived it.
        for (const n of nodes) expect(n.alive(), `${n.name}: ${n.stderr().slice(-3000)}`).toBe(true);
      }
      const report = () =>
        `outcomes: ${JSON.stringify(
          outcomes.map((o) => ({ ...o, body: o.ok ? '(ok)' : o.body })),
          null,
          1,
        )}\n${nodes.map((n) => `${n.name}: ${n.stderr().slice(-2500)}`).join('\n')}`;
      // Each failed request failed typed, through the API (never a torn connection, never an untyped 500).
      for (const o of outcomes.filter((x) => !x.ok)) {
        expect(o.status, `${o.tag}\n${report()}`).toBeGreaterThanOrEqual(400);
        expect(TYPED.has(o.body?.code ?? o.body?.error?.code), `${o.tag}: ${JSON.stringify(o.body)}\n${report()}`).toBe(
          true,
        );
      }
      // The burst met the faults: some requests were refused, some acknowledged, of each kind.
      expect(outcomes.filter((o) => o.ok).length, report()).toBeGreaterThan(0);

      // Every acknowledged spawn: in the log, running (settled), leased to a live node, spawned once, in one container
      // (created once, running). Containers, not PRoot: supervisors sharing one host's ports would race for them
      // (separate hosts in production), and Docker's record shows what ran.
      const acknowledged = outcomes.filter((o) => o.ok);
      const live = new Set(names);
      await until(
        'every acknowledged spawn running',
        () => {
          const rows = cluster.ps();
          return acknowledged
            .filter((o) => o.kind === 'spawn')
            .every((o) => rows.find((r: any) => r.id === o.tag)?.state === 'running')
            ? rows
            : null;
        },
        120_000,
        500,
      ).catch((err: Error) => {
        throw new Error(`${err.message}\nps: ${JSON.stringify(cluster.ps())}\n${report()}`);
      });
      const leases = new Map(
        (await cluster.sql<{ stream: string; node: string }>('SELECT stream, node FROM leases')).map((l) => [
          l.stream,
          l.node,
        ]),
      );
      for (const o of acknowledged.filter((x) => x.kind === 'spawn')) {
        const h = cluster.events(o.tag);
        expect(
          h.filter((e) => e.type === 'instance.spawned'),
          o.tag,
        ).toHaveLength(1);
        expect(h.at(-1)?.type, o.tag).toBe('instance.running');
        expect(
          live.has(leases.get(`instance-${o.tag}`) ?? ''),
          `${o.tag} leased to ${leases.get(`instance-${o.tag}`)}`,
        ).toBe(true);
        await dockerEvents.settled();
        const created = dockerEvents
          .events({ 'runlog.stream': `instance-${o.tag}` })
          .filter((e) => e.action === 'create');
        expect(created, o.tag).toHaveLength(1);
        expect(
          (await cluster.containers({ 'runlog.stream': `instance-${o.tag}` })).map((c) => c.State),
          o.tag,
        ).toEqual(['running']);
      }
      // Every acknowledged execution: succeeded with its own output, requested, started and ended once in the log.
      const all = await expectConsistentLog(cluster);
      const execStreams = new Map<string, RecordedEvent[]>();
      for (const e of all)
        if (e.stream.startsWith('execution-')) execStreams.set(e.stream, [...(execStreams.get(e.stream) ?? []), e]);
      const tagOf = (events: RecordedEvent[]) =>
        ((events[0]?.data as any)?.request?.input?.tag as string | undefined) ?? '';
      for (const o of acknowledged.filter((x) => x.kind === 'exec')) {
        expect(o.body.output, o.tag).toEqual({ tag: o.tag });
        const h = execStreams.get(`execution-${o.body.executionId}`) ?? [];
        expect(tagOf(h), o.tag).toBe(o.tag);
        for (const t of ['execution.requested', 'execution.started', 'execution.succeeded'])
          expect(
            h.filter((e) => e.type === t),
            `${o.tag} ${t}`,
          ).toHaveLength(1);
      }
      // Every failed request left no trace: no stream, no lease, no queued entry, no execution carrying its input.
      const queued = all
        .filter((e) => e.type === 'execution.queued')
        .map((e) => (e.data as any).request?.input?.tag as string);
      for (const o of outcomes.filter((x) => !x.ok)) {
        if (o.kind === 'spawn') {
          expect(
            all.filter((e) => e.stream === `instance-${o.tag}`),
            `${o.tag}\n${report()}`,
          ).toEqual([]);
          expect(leases.has(`instance-${o.tag}`), o.tag).toBe(false);
        } else {
          expect(queued, `${o.tag}\n${report()}`).not.toContain(o.tag);
          expect(
            [...execStreams.values()].filter((h) => tagOf(h) === o.tag),
            o.tag,
          ).toEqual([]);
        }
      }
      // No execution in the log that nobody acknowledged (besides the first), and each ran in exactly one container
      // (Docker's own record: one container created with its stream's label).
      const ackedIds = new Set([
        first.body.executionId,
        ...acknowledged.filter((o) => o.kind === 'exec').map((o) => o.body.executionId),
      ]);
      expect(
        [...execStreams.keys()].filter((s) => !ackedIds.has(s.replace(/^execution-/, ''))),
        report(),
      ).toEqual([]);
      // (A pre-started sandbox taken from the pool counts: its container carries the pool's label, and the log records
      // which execution claimed it.)
      const claimed = all
        .filter((e) => e.type === 'pool.sandbox-claimed')
        .map((e) => (e.data as any).executionId as string);
      for (const o of acknowledged.filter((x) => x.kind === 'exec')) {
        await dockerEvents.settled();
        const created = dockerEvents
          .events({ 'runlog.stream': `execution-${o.body.executionId}`, 'runlog.kind': 'execution' })
          .filter((e) => e.action === 'create');
        expect(created.length + claimed.filter((id) => id === o.body.executionId).length, o.tag).toBe(1);
      }
      // No container unaccounted for: every one labelled with these nodes' homes is a live actor's, or a pre-started
      // sandbox the log records as started and not yet claimed; the ended executions' are removed.
      const rows = cluster.ps();
      const prestarted = new Set(
        all.filter((e) => e.type === 'pool.sandbox-prestarting').map((e) => (e.data as any).sandbox as string),
      );
      const takenSandboxes = new Set(
        all.filter((e) => e.type === 'pool.sandbox-claimed').map((e) => (e.data as any).sandbox as string),
      );
      await until(
        'no container of an ended actor left',
        async () => {
          const left = await cluster.containers();
          return left.every((c) =>
            c.Labels['runlog.kind'] === 'prestart'
              ? Object.values(c.Labels).some((v) => prestarted.has(v) && !takenSandboxes.has(v))
              : rows.some(
                  (r: any) =>
                    `${r.kind}-${r.id}` === c.Labels['runlog.stream'] &&
                    !['succeeded', 'failed', 'stopped', 'lost'].includes(r.state),
                ),
          );
        },
        60_000,
        500,
      ).catch(async (err: Error) => {
        throw new Error(
          `${err.message}\ncontainers: ${JSON.stringify((await cluster.containers()).map((c) => c.Labels))}`,
        );
      });
      // Heartbeats resumed: every node live.
      await until(
        'every node beats again',
        () => {
          const v = JSON.parse(cluster.cli(['nodes', '--json', '--store', cluster.store]).stdout || '{"nodes":[]}');
          return v.nodes.length === 3 && v.nodes.every((n: any) => n.live) ? v : null;
        },
        60_000,
        500,
      );
      // A request after it all works on each node.
      for (const n of nodes) {
        const r = await n.api('POST', '/api/executions', {
          uri,
          handler: 'nap',
          input: { ms: 10, tag: `after-${n.name}` },
          timeoutMs: 120_000,
        });
        expect(r, JSON.stringify(r.body)).toMatchObject({
          status: 200,
          body: { status: 'succeeded', output: { tag: `after-${n.name}` } },
        });
      }
      const codes = await Promise.all(nodes.map((n) => n.stop()));
      for (const [i, n] of nodes.entries()) expect(codes[i], `${n.name}: ${n.stderr().slice(-3000)}`).toBe(0);
    },
  );
});
