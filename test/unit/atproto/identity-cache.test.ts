// The DID document cache (src/adapters/atproto/identity-cache.ts): TTL, 0 = off, shared reads, no negative
// caching, invalidation, the bound, and its configuration (RUNLOG_DID_CACHE_TTL_MS).
import { describe, expect, it } from 'vitest';
import {
  assertDidCacheTtl,
  createIdentityCache,
  DEFAULT_DID_CACHE_TTL_MS,
  MAX_DID_CACHE_TTL_MS,
  type ResolvedIdentity,
} from '../../../src/adapters/atproto/index.ts';
import { atprotoOptions } from '../../../src/cli/client.ts';

const DID = 'did:plc:abcdefghijklmnopqrstuvwx';
const OTHER = 'did:plc:bbbbbbbbbbbbbbbbbbbbbbbb';

/** A resolver that answers document version n on its n-th read, counting reads. */
function resolver() {
  const reads: string[] = [];
  const read = async (did: string): Promise<ResolvedIdentity> => {
    reads.push(did);
    return { did, pdsEndpoint: `https://pds${reads.length}.example`, signingKey: `did:key:z${reads.length}` };
  };
  return { reads, read };
}

function clock(start = 1000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

describe('identity cache', () => {
  it('serves a document for ttlMs after its read, then reads it again', async () => {
    const c = clock();
    const cache = createIdentityCache({ ttlMs: 30_000, now: c.now });
    const r = resolver();
    expect(await cache.lookup(DID, r.read)).toMatchObject({
      fromCache: false,
      identity: { pdsEndpoint: 'https://pds1.example' },
    });
    c.advance(29_999);
    expect(await cache.lookup(DID, r.read)).toMatchObject({
      fromCache: true,
      identity: { pdsEndpoint: 'https://pds1.example' },
    });
    c.advance(1);
    expect(await cache.lookup(DID, r.read)).toMatchObject({
      fromCache: false,
      identity: { pdsEndpoint: 'https://pds2.example' },
    });
    expect(r.reads).toEqual([DID, DID]);
  });

  it('the TTL counts from when the read started, not when it finished', async () => {
    const c = clock();
    const cache = createIdentityCache({ ttlMs: 100, now: c.now });
    let release!: () => void;
    const slow = async (did: string): Promise<ResolvedIdentity> => {
      await new Promise<void>((r) => (release = r));
      return { did, pdsEndpoint: 'https://slow.example', signingKey: 'did:key:zslow' };
    };
    const p = cache.lookup(DID, slow);
    c.advance(100); // the document took the whole TTL to arrive
    release();
    await p;
    const r = resolver();
    expect((await cache.lookup(DID, r.read)).fromCache).toBe(false);
  });

  it('ttlMs 0 reads the document on every lookup and keeps nothing', async () => {
    const cache = createIdentityCache({ ttlMs: 0 });
    const r = resolver();
    for (let i = 0; i < 3; i++) expect((await cache.lookup(DID, r.read)).fromCache).toBe(false);
    expect(r.reads).toHaveLength(3);
    expect(cache.size).toBe(0);
  });

  it('concurrent lookups of one DID share one read; other DIDs are read separately', async () => {
    const cache = createIdentityCache({ ttlMs: 1000 });
    const r = resolver();
    const got = await Promise.all([cache.lookup(DID, r.read), cache.lookup(DID, r.read), cache.lookup(OTHER, r.read)]);
    expect(r.reads).toEqual([DID, OTHER]);
    expect(got[0]!.identity).toBe(got[1]!.identity);
  });

  it('a failed read is not cached: the next lookup reads again', async () => {
    const cache = createIdentityCache({ ttlMs: 1000 });
    let calls = 0;
    const flaky = async (did: string): Promise<ResolvedIdentity> => {
      calls += 1;
      if (calls === 1) throw Object.assign(new Error('PLC down'), { code: 'DID_RESOLUTION_FAILED' });
      return { did, pdsEndpoint: 'https://pds.example', signingKey: 'did:key:zk' };
    };
    await expect(cache.lookup(DID, flaky)).rejects.toThrow('PLC down');
    expect(cache.size).toBe(0);
    expect((await cache.lookup(DID, flaky)).fromCache).toBe(false);
    expect((await cache.lookup(DID, flaky)).fromCache).toBe(true);
    expect(calls).toBe(2);
  });

  it('invalidate forgets a document, and a read in flight when it was invalidated is not stored', async () => {
    const cache = createIdentityCache({ ttlMs: 1000 });
    const r = resolver();
    await cache.lookup(DID, r.read);
    cache.invalidate(DID);
    expect((await cache.lookup(DID, r.read)).identity.pdsEndpoint).toBe('https://pds2.example');
    let release!: () => void;
    const pending = cache.lookup(OTHER, async (did) => {
      await new Promise<void>((res) => (release = res));
      return { did, pdsEndpoint: 'https://old.example', signingKey: 'did:key:zold' };
    });
    cache.invalidate(OTHER);
    release();
    expect((await pending).identity.pdsEndpoint).toBe('https://old.example'); // its caller still gets it…
    expect((await cache.lookup(OTHER, r.read)).fromCache).toBe(false); // …but nobody else does
  });

  it('holds at most maxEntries documents, dropping the oldest read first', async () => {
    const cache = createIdentityCache({ ttlMs: 1000, maxEntries: 2 });
    const r = resolver();
    const dids = [
      'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa',
      'did:plc:bbbbbbbbbbbbbbbbbbbbbbbb',
      'did:plc:cccccccccccccccccccccccc',
    ];
    for (const d of dids) await cache.lookup(d, r.read);
    expect(cache.size).toBe(2);
    expect((await cache.lookup(dids[0]!, r.read)).fromCache).toBe(false);
    expect((await cache.lookup(dids[2]!, r.read)).fromCache).toBe(true);
  });

  it('the default TTL is 30 s; a TTL that is negative, fractional or above the maximum is refused with a code', () => {
    expect(createIdentityCache().ttlMs).toBe(DEFAULT_DID_CACHE_TTL_MS);
    expect(DEFAULT_DID_CACHE_TTL_MS).toBe(30_000);
    for (const bad of [-1, 1.5, MAX_DID_CACHE_TTL_MS + 1, Number.NaN, '30']) {
      expect(() => assertDidCacheTtl(bad)).toThrow(expect.objectContaining({ code: 'DID_CACHE_CONFIG_INVALID' }));
      expect(() => createIdentityCache({ ttlMs: bad as number })).toThrow(
        expect.objectContaining({ code: 'DID_CACHE_CONFIG_INVALID' }),
      );
    }
    expect(assertDidCacheTtl(0)).toBe(0);
  });

  it('RUNLOG_DID_CACHE_TTL_MS sets the TTL (0 turns the cache off); a malformed value is an error', () => {
    expect(atprotoOptions(undefined, {}).didCacheTtlMs).toBeUndefined();
    expect(atprotoOptions(undefined, { RUNLOG_DID_CACHE_TTL_MS: '0' }).didCacheTtlMs).toBe(0);
    expect(atprotoOptions(undefined, { RUNLOG_DID_CACHE_TTL_MS: '60000' }).didCacheTtlMs).toBe(60_000);
    for (const bad of ['-5', '1e3', 'soon', '999999999']) {
      expect(() => atprotoOptions(undefined, { RUNLOG_DID_CACHE_TTL_MS: bad })).toThrow(
        expect.objectContaining({ code: 'DID_CACHE_CONFIG_INVALID' }),
      );
    }
  });
});
