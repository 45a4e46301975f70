// Pure verification paths of the AT Protocol adapter, no network: record proofs (commit signature + MST
// inclusion) on repos built in memory, DID document parsing, alias records, receipts, and the lexicons.

import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Secp256k1Keypair } from '@atproto/crypto';
import {
  MemoryBlockstore,
  Repo,
  WriteOpAction,
  concatBytesAsync,
  getRecords,
  readCarWithRoot,
  blocksToCarFile,
} from '@atproto/repo';
import { BlobRef, lexicons } from '@atproto/api';
import { CID } from 'multiformats/cid';
import { beforeAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/domain/errors.ts';
import { X25519PrivateKey } from '../../../src/domain/at-run/x25519-keys.ts';
import {
  AT_RUN_V2,
  AtprotoError,
  buildAliasRecord,
  buildExecutionRecord,
  buildNotRunRecord,
  buildRunnerRecord,
  cidForRecordJson,
  didDocumentUrl,
  parseAliasRecord,
  parseDidDocument,
  verifyRecordJson,
  verifyRecordProof,
  type ExecutionReceipt,
  type NotRunReceipt,
  type RunnerPolicy,
} from '../../../src/adapters/atproto/index.ts';
import { forgeRecordProof, replaceRecordBlock } from '../../support/pds.ts';
import { codeOfOnly } from '../../support/errors.ts';

const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '../../..');
const interop = join(repoRoot, 'test', 'fixtures', 'interop');

const codeOf = codeOfOnly(AtprotoError, ValidationError);

const DID = 'did:plc:ewvi7nxzyoun6zhxrhs64oiz';
const COLL = 'dev.mainasara.at-run.beta.v2.code';
const record = { $type: COLL, runtime: 'python', entrypoint: 'app/main.py', createdAt: '2026-01-01T00:00:00.000Z' };

describe('verifyRecordProof (repo built in memory)', () => {
  let car: Uint8Array;
  let signingKey: string;
  let storage: MemoryBlockstore;
  let repo: Repo;

  beforeAll(async () => {
    const key = await Secp256k1Keypair.create();
    signingKey = key.did();
    storage = new MemoryBlockstore();
    const writes = [
      { action: WriteOpAction.Create, collection: COLL, rkey: 'hello', record },
      ...Array.from({ length: 40 }, (_, i) => ({
        action: WriteOpAction.Create,
        collection: COLL,
        rkey: `other-${i}`,
        record: { ...record, entrypoint: `e${i}.py` },
      })),
    ];
    repo = await Repo.create(storage, DID, key, writes as never);
    car = await concatBytesAsync(getRecords(storage, repo.cid, [{ collection: COLL, rkey: 'hello' }]));
  });

  it('returns the record, its CID and the commit it was proven under', async () => {
    const out = await verifyRecordProof(car, { did: DID, collection: COLL, rkey: 'hello', signingKey });
    expect(out.value).toEqual(record);
    expect(out.cid).toBe(cidForRecordJson(record));
    expect(out.commit.cid).toBe(repo.cid.toString());
    expect(out.commit.rev).toBe(repo.commit.rev);
  });

  it('proves absence: RECORD_NOT_FOUND', async () => {
    const absent = await concatBytesAsync(getRecords(storage, repo.cid, [{ collection: COLL, rkey: 'nope' }]));
    expect(await codeOf(verifyRecordProof(absent, { did: DID, collection: COLL, rkey: 'nope', signingKey }))).toBe(
      'RECORD_NOT_FOUND',
    );
  });

  it('another key: RECORD_SIGNATURE_INVALID', async () => {
    const other = (await Secp256k1Keypair.create()).did();
    expect(await codeOf(verifyRecordProof(car, { did: DID, collection: COLL, rkey: 'hello', signingKey: other }))).toBe(
      'RECORD_SIGNATURE_INVALID',
    );
  });

  it("another repo's commit: RECORD_SIGNATURE_INVALID", async () => {
    expect(
      await codeOf(
        verifyRecordProof(car, {
          did: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa',
          collection: COLL,
          rkey: 'hello',
          signingKey,
        }),
      ),
    ).toBe('RECORD_SIGNATURE_INVALID');
  });

  it('a forged repo signed by a different key: RECORD_SIGNATURE_INVALID', async () => {
    const forged = await forgeRecordProof(DID, COLL, 'hello', { ...record, entrypoint: 'evil.py' });
    expect(await codeOf(verifyRecordProof(forged, { did: DID, collection: COLL, rkey: 'hello', signingKey }))).toBe(
      'RECORD_SIGNATURE_INVALID',
    );
  });

  it('the record block swapped for another (self-consistent) block: RECORD_PROOF_INVALID', async () => {
    const tampered = await replaceRecordBlock(car, COLL, { ...record, entrypoint: 'evil.py' });
    expect(await codeOf(verifyRecordProof(tampered, { did: DID, collection: COLL, rkey: 'hello', signingKey }))).toBe(
      'RECORD_PROOF_INVALID',
    );
  });

  it('a block whose bytes do not hash to its CID: RECORD_PROOF_INVALID', async () => {
    const { root, blocks } = await readCarWithRoot(car);
    const recordCid = [...blocks.keys()].find((c) => c.toString() === cidForRecordJson(record))!;
    const bytes = Uint8Array.from(blocks.get(recordCid)!);
    bytes[bytes.length - 1] = bytes[bytes.length - 1]! ^ 1;
    blocks.set(recordCid, bytes);
    const bad = await blocksToCarFile(root, blocks);
    expect(await codeOf(verifyRecordProof(bad, { did: DID, collection: COLL, rkey: 'hello', signingKey }))).toBe(
      'RECORD_PROOF_INVALID',
    );
  });

  it('an MST node on the path missing: RECORD_PROOF_INVALID', async () => {
    const { root, blocks } = await readCarWithRoot(car);
    const dataCid = repo.commit.data;
    blocks.delete(dataCid);
    const bad = await blocksToCarFile(root, blocks);
    expect(await codeOf(verifyRecordProof(bad, { did: DID, collection: COLL, rkey: 'hello', signingKey }))).toBe(
      'RECORD_PROOF_INVALID',
    );
  });

  it('not a CAR: RECORD_PROOF_INVALID', async () => {
    expect(
      await codeOf(
        verifyRecordProof(new TextEncoder().encode('{"error":"nope"}'), {
          did: DID,
          collection: COLL,
          rkey: 'hello',
          signingKey,
        }),
      ),
    ).toBe('RECORD_PROOF_INVALID');
  });
});

describe('verifyRecordJson (cid mode)', () => {
  const uri = `at://${DID}/${COLL}/hello`;
  const cid = cidForRecordJson(record);
  it('accepts a self-consistent answer', () => {
    expect(verifyRecordJson({ uri, cid, value: record }, { did: DID, collection: COLL, rkey: 'hello' })).toEqual({
      cid,
      value: record,
    });
  });
  it('a value that does not hash to the cid: RECORD_CID_MISMATCH', () => {
    expect(() =>
      verifyRecordJson(
        { uri, cid, value: { ...record, entrypoint: 'x.py' } },
        { did: DID, collection: COLL, rkey: 'hello' },
      ),
    ).toThrow(expect.objectContaining({ code: 'RECORD_CID_MISMATCH' }));
  });
  it('an answer about another record: RECORD_INVALID', () => {
    expect(() =>
      verifyRecordJson(
        { uri: `at://${DID}/${COLL}/other`, cid, value: record },
        { did: DID, collection: COLL, rkey: 'hello' },
      ),
    ).toThrow(expect.objectContaining({ code: 'RECORD_INVALID' }));
  });
  it('a $type other than the collection: RECORD_INVALID', () => {
    const v = { ...record, $type: 'dev.mainasara.at-run.beta.v2.runtime' };
    expect(() =>
      verifyRecordJson({ uri, cid: cidForRecordJson(v), value: v }, { did: DID, collection: COLL, rkey: 'hello' }),
    ).toThrow(expect.objectContaining({ code: 'RECORD_INVALID' }));
  });
});

describe('parseDidDocument', () => {
  const sigFixtures = JSON.parse(readFileSync(join(interop, 'crypto', 'signature-fixtures.json'), 'utf8')) as {
    didDocSuite: string;
    publicKeyDid: string;
    publicKeyMultibase: string;
    validSignature: boolean;
  }[];
  const doc = (vm: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
    id: DID,
    alsoKnownAs: ['at://Alice.Example.com'],
    verificationMethod: [{ id: `${DID}#atproto`, controller: DID, ...vm }],
    service: [{ id: '#atproto_pds', type: 'AtprotoPersonalDataServer', serviceEndpoint: 'https://pds.example.com/' }],
    ...extra,
  });

  it.each(sigFixtures.filter((f) => f.validSignature).map((f) => [f.didDocSuite, f] as const))(
    'legacy %s keys become the fixture did:key',
    (_s, f) => {
      const id = parseDidDocument(DID, doc({ type: f.didDocSuite, publicKeyMultibase: f.publicKeyMultibase }));
      expect(id).toEqual({
        did: DID,
        pdsEndpoint: 'https://pds.example.com',
        signingKey: f.publicKeyDid,
        handle: 'alice.example.com',
      });
    },
  );

  it('Multikey keys are read as is', () => {
    const f = sigFixtures[1]!;
    const id = parseDidDocument(
      DID,
      doc({ type: 'Multikey', publicKeyMultibase: f.publicKeyDid.slice('did:key:'.length) }),
    );
    expect(id.signingKey).toBe(f.publicKeyDid);
  });

  it('lists every problem: wrong id, no key, no PDS', () => {
    try {
      parseDidDocument(DID, { id: 'did:plc:someoneelse', verificationMethod: [], service: [] });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(AtprotoError);
      expect((err as AtprotoError).code).toBe('DID_RESOLUTION_FAILED');
      expect((err as AtprotoError).details?.issues).toHaveLength(3);
    }
  });

  it('refuses a non-http PDS endpoint and an unknown key type', () => {
    expect(() =>
      parseDidDocument(
        DID,
        doc(
          { type: 'Ed25519VerificationKey2020', publicKeyMultibase: 'z6Mk' },
          { service: [{ id: '#atproto_pds', type: 'AtprotoPersonalDataServer', serviceEndpoint: 'ftp://x' }] },
        ),
      ),
    ).toThrow(/unsupported key type.*not http/s);
  });

  it('didDocumentUrl: plc directory, did:web over https, http only for loopback when allowed', () => {
    expect(didDocumentUrl(DID, { plcUrl: 'http://localhost:2582/' })).toBe(`http://localhost:2582/${DID}`);
    expect(didDocumentUrl('did:web:example.com')).toBe('https://example.com/.well-known/did.json');
    expect(didDocumentUrl('did:web:localhost%3A8080')).toBe('https://localhost:8080/.well-known/did.json');
    expect(didDocumentUrl('did:web:localhost%3A8080', { didWebAllowHttpLoopback: true })).toBe(
      'http://localhost:8080/.well-known/did.json',
    );
    expect(didDocumentUrl('did:web:example.com', { didWebAllowHttpLoopback: true })).toBe(
      'https://example.com/.well-known/did.json',
    );
    expect(() => didDocumentUrl('did:web:example.com:user:alice')).toThrow(/path/);
    expect(() => didDocumentUrl('did:plc:UPPERCASE')).toThrow(/24 base32/);
    expect(() => didDocumentUrl('did:key:zQ3sh')).toThrow(/unsupported DID method/);
  });
});

describe('alias records', () => {
  const codeRef = { uri: `at://${DID}/${AT_RUN_V2.code}/hello`, cid: cidForRecordJson(record) };
  it('builds and parses a pointer to a code record', () => {
    const rec = buildAliasRecord(codeRef, { createdAt: '2026-01-01T00:00:00.000Z' });
    expect(parseAliasRecord(rec as never, 'x')).toEqual({ target: codeRef });
  });
  it('refuses an alias to an alias, a handle authority and a non-record CID, listing each', () => {
    try {
      parseAliasRecord(
        {
          $type: AT_RUN_V2.alias,
          target: {
            uri: `at://alice.test/${AT_RUN_V2.alias}/x`,
            cid: 'bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku',
          },
          createdAt: 'now',
        },
        'x',
      );
      expect.unreachable();
    } catch (err) {
      expect((err as AtprotoError).code).toBe('ALIAS_INVALID');
      expect((err as AtprotoError).details?.issues).toHaveLength(3);
    }
  });
});

const sha = (c: string) => c.repeat(64);
const receipt: ExecutionReceipt = {
  executionId: 'exec_01J9Z3K4M5N6P7Q8R9S0T1V2W3',
  code: { uri: `at://${DID}/${AT_RUN_V2.code}/hello`, cid: cidForRecordJson(record) },
  runtime: { uri: `at://${DID}/${AT_RUN_V2.runtime}/python`, cid: cidForRecordJson({ $type: AT_RUN_V2.runtime }) },
  codeBlobCid: 'bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku',
  handler: 'greet',
  images: {
    runtime: `localhost:5000/runtime-python@sha256:${sha('a')}`,
    sandbox: `localhost:5000/sandbox@sha256:${sha('b')}`,
  },
  limits: { memoryBytes: 256 * 1024 * 1024, pids: 64, milliCpus: 500, timeoutMs: 30_000, network: 'none' },
  inputSha256: sha('c'),
  outputSha256: sha('d'),
  outcome: 'succeeded',
  exitCode: 0,
  callerDid: 'did:plc:bbbbbbbbbbbbbbbbbbbbbbbb',
  startedAt: '2026-01-01T00:00:00.000Z',
  finishedAt: '2026-01-01T00:00:01.250Z',
};
const policy: RunnerPolicy = {
  protocolVersions: [1],
  runtimeKinds: ['language'],
  platforms: [{ os: 'linux', architecture: 'amd64' }],
  isolation: { backend: 'docker', ociRuntime: 'runc', strong: false },
  sandboxImage: `localhost:5000/sandbox@sha256:${sha('b')}`,
  limits: {
    maxMemoryBytes: 512 * 1024 * 1024,
    maxPids: 128,
    maxMilliCpus: 1000,
    maxTimeoutMs: 60_000,
    maxCodeBlobBytes: 10_000_000,
    maxRuntimeArchiveBytes: 200_000_000,
    network: 'none',
  },
};

const refusal: NotRunReceipt = {
  executionId: 'exec_Q2ZJ8W0R5X1M3K7T9B4N6P8H2C',
  job: { uri: `at://${DID}/${AT_RUN_V2.job}/3kabcdefgh2aa`, cid: cidForRecordJson({ $type: AT_RUN_V2.job }) },
  failure: { code: 'JOB_EXPIRED', message: 'its notAfter has passed' },
  callerDid: DID,
  startedAt: '2026-01-01T00:00:00.000Z',
  finishedAt: '2026-01-01T00:00:00.050Z',
};

describe('receipts and runner records', () => {
  it('has an egress summary exactly when the network was the proxy', () => {
    const egress = {
      granted: [{ host: 'api.example.com', ports: [443] }],
      connections: 0,
      refused: 0,
      bytesUp: 0,
      bytesDown: 0,
    };
    const proxy = { ...receipt.limits, network: 'proxy' as const };
    expect(() => buildExecutionRecord({ ...receipt, limits: proxy })).toThrow(/egress: is there exactly when/);
    expect(() => buildExecutionRecord({ ...receipt, egress })).toThrow(/egress: is there exactly when/);
    expect(() => buildExecutionRecord({ ...receipt, limits: proxy, egress: { ...egress, granted: [] } })).toThrow(
      /egress.granted: must list the destinations granted/,
    );
    expect(() => buildExecutionRecord({ ...receipt, limits: proxy, egress: { ...egress, bytesUp: -1 } })).toThrow(
      /egress.bytesUp/,
    );
  });

  it('builds an execution record', () => {
    const rec = buildExecutionRecord(receipt);
    expect(rec.$type).toBe(AT_RUN_V2.execution);
    expect(rec.inputSha256).toBe(sha('c'));
    expect(rec.limits).toEqual(receipt.limits);
    expect(cidForRecordJson(rec)).toMatch(/^bafyrei/);
  });

  it('lists every invalid field of a receipt', () => {
    try {
      buildExecutionRecord({
        ...receipt,
        inputSha256: 'ABC',
        images: { runtime: 'python:3.11', sandbox: receipt.images.sandbox },
        outcome: 'failed',
        finishedAt: 'yesterday',
      });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).issues).toEqual([
        'images.runtime: must be a repository@sha256:<64 hex> reference',
        'inputSha256: must be 64 lowercase hex characters (sha256)',
        'failure: is required when outcome is "failed"',
        'finishedAt: must be an RFC 3339 datetime',
      ]);
    }
  });

  it('names the job a receipt answers by strong ref, and refuses a ref to a record that is not a job', () => {
    const job = { uri: `at://${DID}/${AT_RUN_V2.job}/3kabcdefgh2aa`, cid: cidForRecordJson({ $type: AT_RUN_V2.job }) };
    expect(buildExecutionRecord({ ...receipt, job }).job).toEqual(job);
    expect(buildExecutionRecord(receipt)).not.toHaveProperty('job');
    try {
      buildExecutionRecord({ ...receipt, job: { ...job, uri: receipt.code.uri } });
      expect.unreachable();
    } catch (err) {
      expect((err as ValidationError).issues).toEqual([`job.uri: must be a ${AT_RUN_V2.job} record`]);
    }
  });

  it('references the result blob of a job that succeeded, and refuses one that is not JSON or has no hash', () => {
    const result = {
      $type: 'blob' as const,
      ref: { $link: 'bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku' },
      mimeType: 'application/json',
      size: 36,
    };
    const rec = buildExecutionRecord({ ...receipt, result });
    expect(rec.result).toEqual(result);
    expect(cidForRecordJson(rec)).toMatch(/^bafyrei/);
    const sealed = { ...result, mimeType: 'application/vnd.at-run.sealed+json' };
    expect(buildExecutionRecord({ ...receipt, result: sealed }).result).toEqual(sealed);
    try {
      buildExecutionRecord({
        ...receipt,
        outputSha256: undefined,
        result: { ...result, ref: { $link: receipt.code.cid }, mimeType: 'text/plain' },
      });
      expect.unreachable();
    } catch (err) {
      expect((err as ValidationError).issues).toEqual([
        'result.ref.$link: must be a CIDv1 with codec 0x55',
        'result.mimeType: must be "application/json" or "application/vnd.at-run.sealed+json"',
        'result: needs outputSha256 (the hash of its bytes)',
      ]);
    }
    expect(() => buildExecutionRecord({ ...receipt, result, outcome: 'failed', failure: { kind: 'runtime' } })).toThrow(
      ValidationError,
    );
  });

  it('builds a refusal: the job, why, and none of the fields of an execution that ran', () => {
    const rec = buildNotRunRecord(refusal);
    expect(rec).toEqual({
      $type: AT_RUN_V2.execution,
      executionId: refusal.executionId,
      job: refusal.job,
      outcome: 'failed',
      failure: { kind: 'validation', code: 'JOB_EXPIRED', message: 'its notAfter has passed' },
      callerDid: DID,
      startedAt: refusal.startedAt,
      finishedAt: refusal.finishedAt,
    });
    try {
      buildNotRunRecord({ ...refusal, job: receipt.code, failure: { code: '', message: 'x' } });
      expect.unreachable();
    } catch (err) {
      expect((err as ValidationError).issues).toEqual([
        `job.uri: must be a ${AT_RUN_V2.job} record`,
        'failure.code: must be a non-empty string of at most 128 characters',
      ]);
    }
  });

  it('builds a runner record', () => {
    const rec = buildRunnerRecord(policy, { createdAt: '2026-01-01T00:00:00.000Z' });
    expect(rec).toMatchObject({ $type: AT_RUN_V2.runner, protocolVersions: [1], sandboxImage: policy.sandboxImage });
  });

  it('advertises the egress destinations and limits exactly when the network is "proxy"', () => {
    const egress = {
      destinations: [{ host: '*.example.com', ports: [443] }],
      limits: { maxBytes: 1000, maxSeconds: 60, maxConnections: 8 },
    };
    const rec = buildRunnerRecord({ ...policy, limits: { ...policy.limits, network: 'proxy' }, egress });
    expect(rec).toMatchObject({ limits: { network: 'proxy' }, egress });
    const issues = (p: RunnerPolicy) => {
      try {
        buildRunnerRecord(p);
      } catch (err) {
        return (err as ValidationError).issues;
      }
      return [];
    };
    expect(issues({ ...policy, limits: { ...policy.limits, network: 'proxy' } })).toEqual([
      'egress: is required when limits.network is "proxy"',
    ]);
    expect(issues({ ...policy, egress })).toEqual(['egress: must be absent unless limits.network is "proxy"']);
    expect(
      issues({
        ...policy,
        limits: { ...policy.limits, network: 'proxy' },
        egress: { destinations: [{ host: '', ports: [0] }], limits: { ...egress.limits, maxBytes: 0 } },
      }),
    ).toEqual([
      'egress.destinations[0].host: must be a non-empty string of at most 255 characters',
      'egress.destinations[0].ports[0]: must be a port from 1 to 65535',
      'egress.limits.maxBytes: must be an integer ≥ 1',
    ]);
  });

  it('carries the encryption keys of a runner record, and refuses keys that are not X25519 did:keys', () => {
    const current = X25519PrivateKey.generate().publicKey;
    const old = X25519PrivateKey.generate().publicKey;
    const encryptionKeys = [{ publicKey: old, retiresAt: '2030-01-01T00:00:00.000Z' }, { publicKey: current }];
    const rec = buildRunnerRecord({ ...policy, encryptionKey: current, encryptionKeys });
    expect(rec).toMatchObject({ encryptionKey: current, encryptionKeys });
    try {
      buildRunnerRecord({
        ...policy,
        encryptionKey: 'did:key:z6Mkf5rGMoatrSj1f4CyvuHBeXJELe9RPdzo2PKGNCKVtZxP',
        encryptionKeys: [{ publicKey: current, retiresAt: 'soon' }],
      });
      expect.unreachable();
    } catch (err) {
      expect((err as ValidationError).issues).toEqual([
        'encryptionKey: must be an X25519 public key as a did:key',
        'encryptionKeys[0].retiresAt: must be an RFC 3339 datetime',
        'encryptionKeys: must list encryptionKey without a retire date',
      ]);
    }
  });
});

describe('lexicons', () => {
  const dir = join(repoRoot, 'lexicons');
  const mine = ['alias', 'runner', 'execution', 'job', 'secrets'].map((n) => `dev.mainasara.at-run.beta.v2.${n}`);
  const docs = mine.map(
    (id) =>
      JSON.parse(readFileSync(join(dir, `${id}.json`), 'utf8')) as {
        lexicon: number;
        id: string;
        defs: Record<string, { type: string }>;
      },
  );

  beforeAll(() => {
    for (const d of docs) if (!lexicons.getDef(d.id)) lexicons.add(d as never);
  });

  it('are Lexicon format 1 record schemas named after their files', () => {
    expect(readdirSync(dir)).toEqual(expect.arrayContaining(mine.map((id) => `${id}.json`)));
    for (const [i, d] of docs.entries()) {
      expect(d.lexicon).toBe(1);
      expect(d.id).toBe(mine[i]);
      expect(d.defs.main?.type).toBe('record');
    }
  });

  it('accept the records the adapter builds', () => {
    lexicons.assertValidRecord(AT_RUN_V2.execution, buildExecutionRecord(receipt));
    lexicons.assertValidRecord(
      AT_RUN_V2.execution,
      buildExecutionRecord({
        ...receipt,
        outcome: 'failed',
        outputSha256: undefined,
        failure: { kind: 'timeout', message: 'deadline' },
      }),
    );
    lexicons.assertValidRecord(AT_RUN_V2.execution, buildNotRunRecord(refusal));
    const result = BlobRef.fromJsonRef({
      $type: 'blob',
      ref: CID.parse('bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku'),
      mimeType: 'application/json',
      size: 36,
    });
    lexicons.assertValidRecord(AT_RUN_V2.execution, { ...buildExecutionRecord(receipt), result });
    const sealed = BlobRef.fromJsonRef({
      $type: 'blob',
      ref: CID.parse('bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku'),
      mimeType: 'application/vnd.at-run.sealed+json',
      size: 180,
    });
    lexicons.assertValidRecord(AT_RUN_V2.execution, { ...buildExecutionRecord(receipt), result: sealed });
    const egress = {
      granted: [{ host: 'api.example.com', ports: [443] }],
      connections: 2,
      refused: 1,
      bytesUp: 300,
      bytesDown: 4000,
      stopped: 'EGRESS_BYTES_EXCEEDED',
    };
    const proxied = buildExecutionRecord({ ...receipt, limits: { ...receipt.limits, network: 'proxy' }, egress });
    expect(proxied.egress).toEqual(egress);
    lexicons.assertValidRecord(AT_RUN_V2.execution, proxied);
    lexicons.assertValidRecord(AT_RUN_V2.runner, buildRunnerRecord(policy));
    lexicons.assertValidRecord(
      AT_RUN_V2.runner,
      buildRunnerRecord({
        ...policy,
        limits: { ...policy.limits, network: 'proxy' },
        egress: {
          destinations: [{ host: 'api.example.com', ports: [443, 8443] }],
          limits: { maxBytes: 1000, maxSeconds: 60, maxConnections: 8 },
        },
      }),
    );
    const key = X25519PrivateKey.generate().publicKey;
    lexicons.assertValidRecord(
      AT_RUN_V2.runner,
      buildRunnerRecord({ ...policy, encryptionKey: key, encryptionKeys: [{ publicKey: key }] }),
    );
    lexicons.assertValidRecord(AT_RUN_V2.alias, buildAliasRecord(receipt.code));
  });

  it('reject records missing required fields', () => {
    const { executionId: _id, ...noId } = buildExecutionRecord(receipt);
    expect(() => lexicons.assertValidRecord(AT_RUN_V2.execution, noId)).toThrow(/executionId/);
    expect(() =>
      lexicons.assertValidRecord(AT_RUN_V2.alias, { $type: AT_RUN_V2.alias, createdAt: '2026-01-01T00:00:00.000Z' }),
    ).toThrow(/target/);
  });

  it('validate job and secrets examples', () => {
    lexicons.assertValidRecord(AT_RUN_V2.job, {
      $type: AT_RUN_V2.job,
      code: receipt.code.uri,
      handler: 'greet',
      input: { name: 'Ada' },
      resultKey: X25519PrivateKey.generate().publicKey,
      createdAt: '2026-01-01T00:00:00.000Z',
    });
    lexicons.assertValidRecord(AT_RUN_V2.secrets, {
      $type: AT_RUN_V2.secrets,
      runner: DID,
      recipientKey: 'did:key:z6LSbysY2xFMRpGMhb7tFTLMpeuPRaqaWM1yECx2AtzE3KCc',
      algorithm: 'x25519-xchacha20poly1305',
      entries: [
        {
          name: 'API_TOKEN',
          ephemeralKey: new Uint8Array(32),
          nonce: new Uint8Array(24),
          ciphertext: new Uint8Array(40),
        },
      ],
      createdAt: '2026-01-01T00:00:00.000Z',
    });
  });
});
