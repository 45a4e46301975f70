// The cluster chaos harness: three real supervisors (`runlog serve --store postgres://… --node a|b|c`, via
// cluster-fixture.ts) at a short lease TTL on a throwaway PostgreSQL server of its own (pg-cluster.ts: two fault
// kinds stop or kill the server), a real PDS with a runtime and code published, and the real Docker Engine. It
// carries out a round planned by cluster-chaos-plan.ts (requests through random nodes, the fault struck meanwhile,
// cluster-chaos-faults.ts), waits for the cluster to settle, gathers the evidence and runs cluster-chaos-checks.ts.
//
// Used by test/e2e/cluster-chaos.test.ts (e2e tier) and scripts/chaos-cluster.ts (`npm run chaos:cluster`).
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { publishCode } from '../../src/supervisor/executions/publishing.ts';
import { HELLO_APP_DIR, requireDockerAppBase, requireProot } from './apps.ts';
import {
  checkRound,
  orphanContainers,
  probeTrail,
  type ChaosContainer,
  type ChaosLogEvent,
  type ChaosOutcome,
  type CheckResult,
  type RoundEvidence,
  roundStats,
  type RoundStats,
} from './cluster-chaos-checks.ts';
import {
  armAppendLocked,
  call,
  crashProbe,
  killStrays,
  q,
  qRetry,
  type RoundContext,
  send,
  sleep,
  spawnProbe,
  strike,
  watchLeases,
} from './cluster-chaos-faults.ts';
import type { ChaosRoundPlan } from './cluster-chaos-plan.ts';
import { cleanupClusters, createCluster, type Cluster, type ClusterNode } from './cluster-fixture.ts';
import { docker, requireRegistry, watchContainerEvents, type ContainerEventWatch } from './docker.ts';
import { publishNodeRuntime, startTestPds, type TestPds } from './pds.ts';
import { startThrowawayPostgres } from './pg-cluster.ts';

export const CHAOS_NODES = ['a', 'b', 'c'] as const;
/** Each node's own PRoot port range (`serve --ports`): supervisors on one host never race for a port. */
const PORTS: Record<string, string> = { a: '6100-6199', b: '6200-6299', c: '6300-6399' };
/** Containers of ended or foreign actors get this long after settling to go (issue 27). */
const ORPHAN_GRACE_MS = 30_000;
/** Settling (nodes beating, acknowledged requests settled, the probe's timer due) gets at most this long. */
const SETTLE_MS = 45_000;
/** Live instances carried into the next round (its faults take them over too). */
const LIVE_INSTANCES = 8;

export interface ChaosHarnessOptions {
  runSeed: number;
  /** Every node's lease TTL (default 2,000 ms). */
  ttlMs?: number;
  /** Progress lines (default: console.log). */
  log?: (line: string) => void;
}

export interface RoundResult {
  plan: ChaosRoundPlan;
  evidence: RoundEvidence;
  results: CheckResult[];
  stats: RoundStats;
  /** Every check failure of the round, each a sentence naming the round, the seed and the evidence. */
  failures: string[];
  /** Housekeeping after the checks (instances stopped, orphans removed) that did not go as asked. */
  notes: string[];
  /**
   * For each execution a live node never answered: its events and the end of that node's stderr (empty when the
   * round passed). A failure's message carries it, since CI keeps the failures and not every line printed.
   */
  diagnosis: string;
  /** The round's length, housekeeping included. */
  durationMs: number;
}

/** One line for a finished round: its figures, how long PostgreSQL was out, how long it took. */
export function roundLine(r: RoundResult): string {
  const outage = r.evidence.outageMs === null ? '' : `, PostgreSQL out ${r.evidence.outageMs} ms`;
  const probe = probeTrail(r.evidence);
  return (
    `round ${r.plan.index + 1} (${r.plan.kind}): ${JSON.stringify(r.stats)}${outage}, ` +
    `${Math.round(r.durationMs / 1000)} s${probe ? `; ${probe}` : ''}`
  );
}

export interface ChaosHarness {
  readonly ttlMs: number;
  runRound(plan: ChaosRoundPlan): Promise<RoundResult>;
  /** Supervisors, containers, schemas, the PostgreSQL server, the PDS and any PRoot process left: all gone. */
  close(): Promise<void>;
}

export async function startChaosHarness(options: ChaosHarnessOptions): Promise<ChaosHarness> {
  const ttlMs = options.ttlMs ?? 2000;
  const log = options.log ?? ((l: string) => console.log(l));
  requireProot();
  await requireDockerAppBase();
  await requireRegistry();
  const server = startThrowawayPostgres();
  let pds: TestPds | undefined;
  let watch: ContainerEventWatch | undefined;
  let pool: pg.Pool | undefined;
  let cluster: Cluster | undefined;
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    watch?.stop();
    await pool?.end().catch(() => undefined);
    await cleanupClusters();
    const strays = cluster ? killStrays(cluster.root) : 0;
    if (strays > 0) log(`cluster chaos: killed ${strays} PRoot process group(s) left behind by killed nodes`);
    server.destroy();
    await pds?.close();
  };
  try {
    cluster = await createCluster({ tag: 'chaos', ttlMs, url: server.url });
    const c = cluster;
    pool = new pg.Pool({
      connectionString: server.url,
      max: 3,
      connectionTimeoutMillis: 3000,
      options: `-c search_path=${c.schema} -c statement_timeout=10000`,
    });
    pool.on('error', () => undefined); // an idle client cut off by a server restart: the next query gets a new one
    pds = await startTestPds();
    const runtime = await publishNodeRuntime(pds, `chaosrt-${process.pid}.test`);
    const author = await pds.createAccount(`chaos-${process.pid}.test`);
    const codeDir = join(c.root, 'code');
    mkdirSync(codeDir);
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
    // The timer probe's apps: hello-app with a restart backoff of 2×TTL (the timer still pending, persisted, when
    // its owner goes, due after the takeover) or of 1 s (due before any takeover: overdue when it happens).
    const probeApps = { pending: join(c.root, 'probe-pending'), overdue: join(c.root, 'probe-overdue') };
    const manifest = JSON.parse(readFileSync(join(HELLO_APP_DIR, 'runlog.json'), 'utf8'));
    for (const [which, dir] of Object.entries(probeApps)) {
      cpSync(HELLO_APP_DIR, dir, { recursive: true });
      const backoffMs = which === 'pending' ? 2 * ttlMs : 1000;
      writeFileSync(
        join(dir, 'runlog.json'),
        JSON.stringify({
          ...manifest,
          restart: { policy: 'on-failure', maxRestarts: 5, backoffMs, maxBackoffMs: 4 * backoffMs },
        }),
      );
    }
    const flagsOf = (name: string) => ['--plc', pds!.plcUrl, '--ports', PORTS[name]!];
    const nodes = new Map<string, ClusterNode>();
    for (const name of CHAOS_NODES) nodes.set(name, await c.startNode(name, flagsOf(name)));
    // One execution first, alone: two nodes materializing the same code volume at once trip over each other's
    // unsealed volume (README, Not done yet); sealed once, every node finds it cached.
    const warm = await call(nodes.get('a')!, 'POST', '/api/executions', {
      uri,
      handler: 'nap',
      input: { ms: 10, tag: 'warm' },
      timeoutMs: 120_000,
    });
    if (warm.status !== 200 || warm.body?.status !== 'succeeded')
      throw new Error(`the warm-up execution failed: ${warm.status} ${JSON.stringify(warm.body)}`);
    watch = await watchContainerEvents();
    const ctx: RoundContext = {
      cluster: c,
      server,
      pool,
      watch,
      nodes,
      flagsOf,
      uri,
      probeApps,
      ttlMs,
      runSeed: options.runSeed,
      log,
      reported: new Set(),
    };
    return { ttlMs, runRound: (plan) => runRound(ctx, plan), close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** One round: requests through random nodes, the fault struck after one of them, then settling and the checks. */
async function runRound(ctx: RoundContext, plan: ChaosRoundPlan): Promise<RoundResult> {
  const began = Date.now();
  let faultFailure: string | null = null;
  let probe: RoundEvidence['probe'] = null;
  let probeId: string | null = null;
  if (plan.kind === 'stop-append-locked') faultFailure = await armAppendLocked(ctx, plan);
  if (plan.timerProbe) {
    const p = await spawnProbe(ctx, plan);
    if ('error' in p) probe = p;
    else probeId = p.id;
  }
  const roundStartSeq =
    (await qRetry<{ max: number | null }>(ctx, 'SELECT max(seq)::int AS max FROM events'))[0]?.max ?? 0;
  const dockerFrom = ctx.watch.events({}).length;
  const t0 = Date.now();
  const leaseWatch = watchLeases(ctx, t0);
  const sends: Promise<ChaosOutcome>[] = [];
  let fault: Promise<{ outageMs: number | null; failure: string | null }> = Promise.resolve({
    outageMs: null,
    failure: null,
  });
  let extra = 100;
  const nudge = (node: string) =>
    void sends.push(send(ctx, plan, { i: extra++, kind: 'exec', via: node, pin: node, gapMs: 0, napMs: 200 }));
  for (const r of plan.requests) {
    await sleep(r.gapMs);
    sends.push(send(ctx, plan, r));
    if (r.i === plan.faultAfter) {
      if (probeId) probe = await crashProbe(ctx, probeId);
      fault = faultFailure ? fault : strike(ctx, plan, nudge);
    }
  }
  const struck = await fault;
  faultFailure ??= struck.failure;
  const outcomes = await Promise.all(sends);
  const settled = await settle(ctx, plan, outcomes, probe);
  const leaseMoves = await leaseWatch.stop();
  const evidence = await gatherEvidence(ctx, plan, {
    outcomes,
    roundStartSeq,
    dockerFrom,
    leaseMoves,
    outageMs: struck.outageMs,
    faultFailure,
    probe,
  });
  const results = checkRound(evidence);
  const failures = results.flatMap((r) => r.failures);
  const diagnosis = failures.length ? await explainUnanswered(ctx, plan, outcomes) : '';
  if (diagnosis) ctx.log(diagnosis);
  const stats = roundStats(evidence, results);
  const notes = await tidy(ctx, evidence, settled);
  return { plan, evidence, results, stats, failures, notes, diagnosis, durationMs: Date.now() - began };
}

/**
 * For each execution a live node never answered: its queue entry and its events in the log, and the end of the
 * stderr of the node that took the call and of each node that wrote its events. The answers check says only that
 * no answer came; this says how far the execution got, and what the nodes said.
 */
async function explainUnanswered(ctx: RoundContext, plan: ChaosRoundPlan, outcomes: ChaosOutcome[]): Promise<string> {
  const out: string[] = [];
  for (const o of outcomes.filter((x) => x.kind === 'exec' && x.status === 0 && x.via !== plan.victim)) {
    const events = await qRetry<{ seq: number; stream: string; type: string; at: string; meta: { node?: string } }>(
      ctx,
      `WITH ids AS (
         SELECT data->>'executionId' AS id FROM events
          WHERE stream = 'queue-executions' AND type = 'execution.queued' AND data->'request'->'input'->>'tag' = $1
         UNION SELECT substr(stream, 11) FROM events
          WHERE type = 'execution.requested' AND data->'request'->'input'->>'tag' = $1)
       SELECT seq::int, stream, type, at, meta FROM events
        WHERE stream IN (SELECT 'execution-' || id FROM ids)
           OR (stream = 'queue-executions' AND data->>'executionId' IN (SELECT id FROM ids))
        ORDER BY seq`,
      [o.tag],
    ).catch((err: unknown) => [
      { seq: 0, stream: '-', type: `(query failed: ${String(err)})`, at: '', meta: {} as { node?: string } },
    ]);
    const lines = events.map((e) => `    ${e.seq} ${e.stream} ${e.type} ${e.at} ${JSON.stringify(e.meta)}`);
    out.push(`  ${o.tag} (through ${o.via}) in the log:\n${lines.join('\n') || '    (not queued, not requested)'}`);
    const writers = new Set([o.via, ...events.map((e) => e.meta?.node).filter((n): n is string => !!n)]);
    for (const name of writers) {
      const node = ctx.nodes.get(name);
      if (node) out.push(`  the end of ${name}'s stderr:\n${node.stderr().slice(-3000)}`);
    }
  }
  return out.join('\n');
}

/**
 * Waits (at most SETTLE_MS) until every node beats, every acknowledged request is settled and the probe's timer is
 * due; returns what had not settled.
 */
async function settle(
  ctx: RoundContext,
  plan: ChaosRoundPlan,
  outcomes: ChaosOutcome[],
  probe: RoundEvidence['probe'],
): Promise<string | null> {
  const deadline = Date.now() + SETTLE_MS;
  const probeDue = probe && 'stream' in probe ? Date.now() + 2 * ctx.ttlMs + 3 * ctx.ttlMs : 0;
  let waiting = '';
  while (Date.now() < deadline) {
    try {
      const down = [...ctx.nodes.values()].filter((n) => !n.alive()).map((n) => n.name);
      const beats = await q<{ node: string; fresh: boolean }>(
        ctx,
        'SELECT node, (extract(epoch FROM clock_timestamp() - beat_at::timestamptz) ' +
          '* 1000 < 3 * interval_ms) AS fresh FROM nodes WHERE stopped_at IS NULL',
      );
      const stale = [...ctx.nodes.keys()].filter((n) => !beats.some((b) => b.node === n && b.fresh));
      const docs = new Map(
        (
          await q<{ id: string; state: string; status: string }>(
            ctx,
            "SELECT id, doc->>'state' AS state, doc->>'status' AS status FROM projection_documents WHERE projection = 'actors'",
          )
        ).map((d) => [d.id, d]),
      );
      const unsettled = outcomes
        .filter(
          (o) =>
            o.acked &&
            (o.kind === 'exec'
              ? docs.get(`execution-${o.body?.executionId}`)?.status !== 'terminal'
              : docs.get(`instance-${o.tag}`)?.state !== 'running'),
        )
        .map((o) => o.tag);
      let timer = false;
      if (probe && 'stream' in probe && Date.now() < probeDue) {
        timer =
          (
            await q(ctx, "SELECT 1 FROM events WHERE stream = $1 AND seq > $2 AND type = 'instance.restart-due'", [
              probe.stream,
              probe.scheduledSeq,
            ])
          ).length === 0;
      }
      waiting = [
        down.length ? `nodes not running: ${down.join(', ')}` : '',
        stale.length ? `nodes not beating: ${stale.join(', ')}` : '',
        unsettled.length ? `not settled: ${unsettled.join(', ')}` : '',
        timer ? 'the probe has no restart-due yet' : '',
      ]
        .filter(Boolean)
        .join('; ');
      if (!waiting) return null;
    } catch (err) {
      waiting = `the store did not answer: ${(err as Error).message}`;
    }
    await sleep(500);
  }
  ctx.log(`round ${plan.index + 1}: not settled within ${SETTLE_MS / 1000} s (${waiting}); checking as it is`);
  // A node that died is the finding itself: what it said last says why.
  for (const n of ctx.nodes.values())
    if (!n.alive()) ctx.log(`node ${n.name} is not running; the end of its stderr:\n${n.stderr().slice(-3000)}`);
  return waiting;
}

interface Gathered {
  outcomes: ChaosOutcome[];
  roundStartSeq: number;
  dockerFrom: number;
  leaseMoves: RoundEvidence['leaseMoves'];
  outageMs: number | null;
  faultFailure: string | null;
  probe: RoundEvidence['probe'];
}

/**
 * The log, the actors, the leases and Docker's events as they are, polled until no container of this round is
 * an orphan or ORPHAN_GRACE_MS has passed. A round's containers: those Docker saw created or started during it,
 * and those of the actors that had events in it (a taken-over instance's old container was made rounds ago).
 */
async function gatherEvidence(ctx: RoundContext, plan: ChaosRoundPlan, g: Gathered): Promise<RoundEvidence> {
  const homes = Object.fromEntries([...ctx.nodes.values()].map((n) => [n.home, n.name]));
  const deadline = Date.now() + ORPHAN_GRACE_MS;
  for (;;) {
    await ctx.watch.settled();
    const events = await qRetry<ChaosLogEvent>(
      ctx,
      'SELECT seq::int, stream, type, data, meta FROM events ORDER BY seq',
    );
    const actors = new Map(
      (
        await qRetry<{ id: string; state: string; status: string }>(
          ctx,
          "SELECT id, doc->>'state' AS state, doc->>'status' AS status FROM projection_documents WHERE projection = 'actors'",
        )
      ).map((d) => [d.id, { state: d.state, status: d.status }]),
    );
    const leases = new Map(
      (await qRetry<{ stream: string; node: string }>(ctx, 'SELECT stream, node FROM leases')).map((l) => [
        l.stream,
        l.node,
      ]),
    );
    const dockerEvents = ctx.watch.events({}).slice(g.dockerFrom);
    const roundStreams = new Set(events.filter((e) => e.seq > g.roundStartSeq).map((e) => e.stream));
    const roundIds = new Set(dockerEvents.map((d) => d.id));
    const containersLeft: ChaosContainer[] = (await ctx.cluster.containers())
      .filter((c) => c.State !== 'exited' && c.State !== 'dead' && !ctx.reported.has(c.Id))
      .filter((c) => roundIds.has(c.Id) || roundStreams.has(c.Labels['runlog.stream'] ?? ''))
      .map((c) => ({ id: c.Id, state: c.State, labels: c.Labels }));
    const liveNodes = [...ctx.nodes.values()].filter((n) => n.alive()).map((n) => n.name);
    const evidence: RoundEvidence = {
      plan,
      runSeed: ctx.runSeed,
      ttlMs: ctx.ttlMs,
      outcomes: g.outcomes,
      events,
      roundStartSeq: g.roundStartSeq,
      actors,
      leases,
      dockerEvents,
      leaseMoves: g.leaseMoves,
      outageMs: g.outageMs,
      containersLeft,
      homes,
      liveNodes,
      faultFailure: g.faultFailure,
      probe: g.probe,
    };
    const orphans = orphanContainers(evidence);
    if (orphans.length === 0 || Date.now() > deadline) return evidence;
    await sleep(1000);
  }
}

/**
 * After the checks: the oldest live instances stopped (through a live node) so that at most LIVE_INSTANCES run into
 * the next round (they are taken over there, but the load stays bounded), and the orphans the round reported
 * removed so that a later round does not inherit them. Returns what did not go as asked.
 */
async function tidy(ctx: RoundContext, ev: RoundEvidence, settled: string | null): Promise<string[]> {
  const notes: string[] = settled ? [`round ${ev.plan.index + 1} had not settled: ${settled}`] : [];
  const orphanIds = new Set(orphanContainers(ev).map((o) => o.container.id));
  const firstSeq = new Map<string, number>();
  for (const e of ev.events)
    if (e.stream.startsWith('instance-') && !firstSeq.has(e.stream)) firstSeq.set(e.stream, e.seq);
  const live = [...firstSeq.keys()]
    .filter((s) => ev.actors.get(s)?.status === 'active')
    .sort((x, y) => firstSeq.get(x)! - firstSeq.get(y)!);
  const instances = live.slice(0, Math.max(0, live.length - LIVE_INSTANCES));
  const via = [...ctx.nodes.values()].find((n) => n.alive())!;
  const stops = await Promise.all(
    instances.map(async (s) => ({
      s,
      r: await call(via, 'POST', `/api/actors/${s.replace(/^instance-/, '')}/stop`, { graceMs: 1000 }),
    })),
  );
  for (const { s, r } of stops)
    if (r.status !== 200)
      notes.push(
        `stopping ${s} after the round through ${via.name}: ${r.status} ${r.error} ${JSON.stringify(r.body?.error?.message ?? '')}`,
      );
  for (const c of ev.containersLeft) {
    if (!orphanIds.has(c.id)) continue;
    const left = await docker
      .getContainer(c.id)
      .inspect()
      .catch(() => null);
    if (!left || !left.State.Running) continue;
    ctx.reported.add(c.id);
    await docker
      .getContainer(c.id)
      .remove({ force: true })
      .catch(() => undefined);
    notes.push(`removed container ${c.id.slice(0, 12)} of ${c.labels['runlog.stream']} (reported as an orphan)`);
  }
  return notes;
}
