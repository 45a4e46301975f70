// Fencing on the real PostgreSQL server, at the store: two supervisors' stores (nodes a and b) on one schema.
// An append under a lease that expired — however long its node was paused, whether or not anyone took it yet —
// or that another node took over is refused in the append's transaction (FencedError) and writes nothing; the
// new owner's appends go through; a takeover never overtakes an append that holds the lease row.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FencedError } from '../../../src/domain/errors.ts';
import { PgHostStore } from '../../../src/store/postgres/host-store.ts';
import { collect } from '../../../src/store/port.ts';
import { dropSchemas, requirePostgres, testSchema } from '../../support/postgres.ts';

let url = '';
const open: PgHostStore[] = [];
beforeAll(async () => {
  url = await requirePostgres();
});
afterAll(async () => {
  for (const s of open) await s.close().catch(() => undefined);
  if (url) await dropSchemas(url);
});

async function node(schema: string, name: string, leaseTtlMs: number): Promise<PgHostStore> {
  const s = await PgHostStore.open({ url, schema, node: { name, leaseTtlMs }, pollMs: 0 });
  open.push(s);
  return s;
}

const ev = (type: string) => ({ type, data: { n: 1 } });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('fenced appends on PostgreSQL', () => {
  it('an expired lease cannot append even before anyone takes it; a taken-over one cannot append after; the new owner can', async () => {
    const schema = testSchema('fence');
    const a = await node(schema, 'a', 400);
    const b = await node(schema, 'b', 400);
    const stream = 'instance-f1';
    await a.appendToStream(stream, [ev('instance.requested')], { expectedVersion: 'no-stream' });
    expect(a.leasing!.leases.owns(stream)).toBe(true);
    // b cannot append to a's actor (it holds no lease: refused before it is sent).
    await expect(b.appendToStream(stream, [ev('x')], { expectedVersion: 1 })).rejects.toBeInstanceOf(FencedError);

    // a is "paused": it does not renew. Past the expiry its append is refused though nobody took the lease yet.
    await sleep(700);
    expect(a.leasing!.leases.owns(stream)).toBe(true); // a still believes it owns it
    const refused = await a.appendMany([{ stream, events: [ev('instance.spawned')], expectedVersion: 1 }]);
    expect(refused[0]).toMatchObject({ ok: false });
    expect((refused[0] as { error: Error }).error).toBeInstanceOf(FencedError);
    expect(a.leasing!.leases.owns(stream)).toBe(false); // and it lets go

    // b takes it over and appends; a, woken and trying again, is refused; the stream holds b's event only.
    const taken = await b.leasing!.leases.takeExpired();
    expect(taken).toEqual([expect.objectContaining({ stream, previous: 'a' })]);
    await b.appendToStream(stream, [ev('instance.lost')], { expectedVersion: 1 });
    await expect(a.appendToStream(stream, [ev('instance.spawned')], { expectedVersion: 2 })).rejects.toBeInstanceOf(
      FencedError,
    );
    await b.poll();
    expect((await collect(b.readStream(stream))).map((e) => e.type)).toEqual(['instance.requested', 'instance.lost']);
    // Renewal tells a what it lost; b's renewal keeps its own.
    expect(await b.leasing!.leases.renew()).toEqual([]);
  });

  it(
    'a node that comes back with its name reclaims its unexpired leases with new tokens ' +
      "(an older incarnation's token is fenced)",
    async () => {
      const schema = testSchema('fence');
      const old = await node(schema, 'a', 5000);
      await old.appendToStream('instance-f2', [ev('instance.requested')], { expectedVersion: 'no-stream' });
      const again = await node(schema, 'a', 5000);
      expect(again.leasing!.leases.owns('instance-f2')).toBe(true);
      await again.appendToStream('instance-f2', [ev('instance.spawned')], { expectedVersion: 1 });
      await expect(
        old.appendToStream('instance-f2', [ev('instance.spawned')], { expectedVersion: 2 }),
      ).rejects.toBeInstanceOf(FencedError);
      // Facts (not actor streams) are not leased.
      await old.appendToStream('reconciler', [ev('reconciler.discovered')], { expectedVersion: 'any' });
    },
  );
  it(
    'a claim retried after its first try committed (reply lost) keeps the lease it holds; ' +
      'a claim of a stream another node holds takes nothing',
    async () => {
      const schema = testSchema('fence');
      const a = await node(schema, 'a', 5000);
      const b = await node(schema, 'b', 5000);
      const stream = 'execution-retried';
      const claimOf = (n: string, claimed: Map<string, number>) => ({
        fence: {
          node: n,
          tokens: new Map<string, number>(),
          claim: { streams: new Set([stream]), ttlMs: 5000, claimed },
        },
      });
      const first = new Map<string, number>();
      const [o1] = await a.pg.appendMany(
        [{ stream, events: [ev('execution.requested')], expectedVersion: 'no-stream' }],
        claimOf('a', first),
      );
      expect(o1!.ok).toBe(true);
      // The retry: the stream exists now, so its first event is refused; the lease is still a's (renewed), not gone.
      const retry = new Map<string, number>();
      const [o2] = await a.pg.appendMany(
        [{ stream, events: [ev('execution.requested')], expectedVersion: 'no-stream' }],
        claimOf('a', retry),
      );
      expect(o2!.ok).toBe(false);
      const leases = await a.pg.sql<{ node: string; token: string }>(
        'SELECT node, token FROM leases WHERE stream = $1',
        [stream],
      );
      expect(leases).toHaveLength(1);
      expect(leases[0]!.node).toBe('a');
      expect(retry.get(stream)).toBe(Number(leases[0]!.token));
      // Another node's claim of it takes nothing and removes nothing.
      const other = new Map<string, number>();
      const [o3] = await b.pg.appendMany(
        [{ stream, events: [ev('execution.requested')], expectedVersion: 'no-stream' }],
        claimOf('b', other),
      );
      expect(o3!.ok).toBe(false);
      expect(other.size).toBe(0);
      expect(await a.pg.sql('SELECT node FROM leases WHERE stream = $1', [stream])).toEqual([{ node: 'a' }]);
    },
  );
});
