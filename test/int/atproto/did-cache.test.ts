// The reader's DID document cache against a real PDS and PLC directory (in-process @atproto/dev-env), each seen
// through a counting proxy: only the DID → document step is cached; records, proofs, signatures and blobs are
// read and verified on every call; a document that changed is picked up at once when the cached one fails.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AT_RUN_V2, createAtprotoReader, type JsonObject } from '../../../src/adapters/atproto/index.ts';
import {
  replaceRecordBlock,
  startPdsProxy,
  startTestPds,
  type PdsProxy,
  type ProxiedResponse,
  type TestAccount,
  type TestPds,
} from '../../support/pds.ts';
import { codeOf } from '../../support/errors.ts';

const CODE = AT_RUN_V2.code;
const now = () => new Date().toISOString();

let pds: TestPds;
let plc: PdsProxy;
let front: PdsProxy;
let alice: TestAccount;
let mode: 'pass' | 'forge' | 'tamper-blob' = 'pass';

const didReads = (did: string) => plc.requests.filter((p) => p === `/${did}`).length;
const recordReads = () => front.requests.filter((p) => p.startsWith('/xrpc/com.atproto.sync.getRecord?')).length;

beforeAll(async () => {
  pds = await startTestPds();
  plc = await startPdsProxy(pds.plcUrl, (_path, up) => up);
  front = await startPdsProxy(pds.pdsUrl, async (path, up): Promise<ProxiedResponse> => {
    if (up.status !== 200) return up;
    if (mode === 'forge' && path.startsWith('/xrpc/com.atproto.sync.getRecord?')) {
      return {
        ...up,
        body: await replaceRecordBlock(up.body, CODE, {
          $type: CODE,
          runtime: 'node',
          entrypoint: 'evil.mjs',
          createdAt: '2026-01-01T00:00:00.000Z',
        }),
      };
    }
    if (mode === 'tamper-blob' && path.startsWith('/xrpc/com.atproto.sync.getBlob?')) {
      const b = Uint8Array.from(up.body);
      b[0] = b[0]! ^ 0x01;
      return { ...up, body: b };
    }
    return up;
  });
  alice = await pds.createAccount('alice.test');
  await pds.setPdsEndpoint(alice.did, front.url);
});

afterAll(async () => {
  await front?.close();
  await plc?.close();
  await pds?.close();
});

describe('the DID document cache (default TTL)', () => {
  let rec: { uri: string; cid: string };
  let blobCid: string;
  let blob: JsonObject;
  const bytes = new TextEncoder().encode('some code archive bytes');

  beforeAll(async () => {
    blob = (await alice.publisher.uploadBlob(bytes, 'application/octet-stream')) as unknown as JsonObject;
    blobCid = (blob.ref as { $link: string }).$link;
    // Every version references the blob: the PDS keeps only blobs a record references.
    rec = await alice.publisher.putRecord(CODE, 'live', {
      runtime: 'node',
      entrypoint: 'v1.mjs',
      blob,
      createdAt: now(),
    });
  });

  it('reads the DID document once, and the record (proof and signature checked) on every call', async () => {
    const reader = createAtprotoReader({ plcUrl: plc.url });
    const docsBefore = didReads(alice.did);
    const recordsBefore = recordReads();
    for (let i = 0; i < 3; i++)
      await expect(reader.fetchRecord(rec.uri)).resolves.toMatchObject({ cid: rec.cid, mode: 'strict' });
    await expect(reader.fetchBlob(alice.did, blobCid)).resolves.toMatchObject({ cid: blobCid });
    expect(didReads(alice.did) - docsBefore).toBe(1);
    expect(recordReads() - recordsBefore).toBe(3);
  });

  it('a record changed between two calls is seen on the second (records are never cached)', async () => {
    const reader = createAtprotoReader({ plcUrl: plc.url });
    await expect(reader.fetchRecord(rec.uri)).resolves.toMatchObject({ cid: rec.cid });
    const v2 = await alice.publisher.putRecord(CODE, 'live', {
      runtime: 'node',
      entrypoint: 'v2.mjs',
      blob,
      createdAt: now(),
    });
    const got = await reader.fetchRecord(rec.uri);
    expect(got.cid).toBe(v2.cid);
    expect(got.value.entrypoint).toBe('v2.mjs');
    // A strong reference to the old version is now a mismatch, cache or not.
    expect(await codeOf(reader.fetchRecord(rec.uri, { expectCid: rec.cid }))).toBe('RECORD_CID_MISMATCH');
    rec = v2;
  });

  it('a forged record or tampered blob served while the document is cached is still rejected', async () => {
    const reader = createAtprotoReader({ plcUrl: plc.url });
    await reader.fetchRecord(rec.uri); // the document is cached now
    try {
      mode = 'forge';
      expect(await codeOf(reader.fetchRecord(rec.uri))).toMatch(/^RECORD_(PROOF|SIGNATURE)_INVALID$/);
      mode = 'tamper-blob';
      expect(await codeOf(reader.fetchBlob(alice.did, blobCid))).toBe('BLOB_CID_MISMATCH');
    } finally {
      mode = 'pass';
    }
    await expect(reader.fetchRecord(rec.uri)).resolves.toMatchObject({ cid: rec.cid });
  });

  it('didCacheTtlMs 0 reads the DID document on every call', async () => {
    const reader = createAtprotoReader({ plcUrl: plc.url, didCacheTtlMs: 0 });
    const before = didReads(alice.did);
    for (let i = 0; i < 3; i++) await reader.fetchRecord(rec.uri);
    await reader.fetchBlob(alice.did, blobCid);
    expect(didReads(alice.did) - before).toBe(4);
    expect(reader.identities.size).toBe(0);
  });
});

describe('a DID document that changed while cached', () => {
  it('an account that moved: the cached PDS fails, a fresh document is read and the call succeeds', async () => {
    const bob = await pds.createAccount('bob.test');
    const rec = await bob.publisher.putRecord(CODE, 'moved', {
      runtime: 'node',
      entrypoint: 'index.mjs',
      createdAt: now(),
    } as JsonObject);
    await pds.setPdsEndpoint(bob.did, 'http://127.0.0.1:1'); // nothing listens there
    const reader = createAtprotoReader({ plcUrl: plc.url });
    expect((await reader.resolveDid(bob.did)).pdsEndpoint).toBe('http://127.0.0.1:1');
    await pds.setPdsEndpoint(bob.did, pds.pdsUrl);
    const before = didReads(bob.did);
    const got = await reader.fetchRecord(rec.uri);
    expect(got).toMatchObject({ cid: rec.cid, pdsEndpoint: pds.pdsUrl });
    expect(didReads(bob.did) - before).toBe(1); // exactly one fresh read
    // The fresh document is the cached one now.
    await reader.fetchRecord(rec.uri);
    expect(didReads(bob.did) - before).toBe(1);
  });

  it('a failure with a document read for this very call is the answer (no second read)', async () => {
    const carol = await pds.createAccount('carol.test');
    const rec = await carol.publisher.putRecord(CODE, 'gone', {
      runtime: 'node',
      entrypoint: 'index.mjs',
      createdAt: now(),
    } as JsonObject);
    await pds.setPdsEndpoint(carol.did, 'http://127.0.0.1:1');
    const reader = createAtprotoReader({ plcUrl: plc.url });
    const before = didReads(carol.did);
    expect(await codeOf(reader.fetchRecord(rec.uri))).toBe('PDS_UNREACHABLE');
    expect(didReads(carol.did) - before).toBe(1);
  });

  it('within the TTL, a moved account whose old PDS still answers honestly is read there (the documented trade)', async () => {
    const dave = await pds.createAccount('dave.test');
    const rec = await dave.publisher.putRecord(CODE, 'here', {
      runtime: 'node',
      entrypoint: 'index.mjs',
      createdAt: now(),
    } as JsonObject);
    const reader = createAtprotoReader({ plcUrl: plc.url });
    await expect(reader.fetchRecord(rec.uri)).resolves.toMatchObject({ pdsEndpoint: pds.pdsUrl });
    await pds.setPdsEndpoint(dave.did, front.url);
    await expect(reader.fetchRecord(rec.uri)).resolves.toMatchObject({ cid: rec.cid, pdsEndpoint: pds.pdsUrl });
    reader.identities.invalidate(dave.did);
    await expect(reader.fetchRecord(rec.uri)).resolves.toMatchObject({ cid: rec.cid, pdsEndpoint: front.url });
  });
});
