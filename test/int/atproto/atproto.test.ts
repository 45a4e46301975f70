// The AT Protocol adapter against a real PDS + PLC directory (in-process @atproto/dev-env, real XRPC over
// HTTP). A "lying PDS" is a node:http proxy on 127.0.0.1 in front of the real PDS that rewrites answers;
// the victim's DID document is re-pointed at it through a signed PLC operation, exactly as a hostile or
// compromised PDS host would be reached in production.

import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../../src/domain/errors.ts';
import {
  AT_RUN_V2,
  AtprotoError,
  buildAliasRecord,
  buildExecutionRecord,
  buildRunnerRecord,
  cidForBlobBytes,
  cidForRecordJson,
  createAtprotoReader,
  createPublisher,
  fetchBlob,
  fetchRecord,
  putRunnerRecord,
  resolveAlias,
  resolveCodeUri,
  resolveDid,
  resolveHandle,
  sha256Hex,
  writeExecutionReceipt,
  type ExecutionReceipt,
  type JsonObject,
  type RunnerPolicy,
} from '../../../src/adapters/atproto/index.ts';
import {
  forgeRecordProof,
  replaceRecordBlock,
  startPdsProxy,
  startTestPds,
  type PdsProxy,
  type ProxiedResponse,
  type TestAccount,
  type TestPds,
} from '../../support/pds.ts';
import { codeOfOnly } from '../../support/errors.ts';

const codeOf = codeOfOnly(AtprotoError, ValidationError);

const CODE = AT_RUN_V2.code;
const RUNTIME = AT_RUN_V2.runtime;
const now = () => new Date().toISOString();

let pds: TestPds;
let alice: TestAccount;
const opts = () => ({ plcUrl: pds.plcUrl });

beforeAll(async () => {
  pds = await startTestPds();
  alice = await pds.createAccount('alice.test');
});

afterAll(async () => {
  await pds?.close();
});

describe('identity', () => {
  it('resolves a did:plc to its PDS, #atproto key and handle', async () => {
    const id = await resolveDid(alice.did, opts());
    expect(id).toEqual({
      did: alice.did,
      pdsEndpoint: pds.pdsUrl,
      signingKey: expect.stringMatching(/^did:key:z[1-9A-HJ-NP-Za-km-z]+$/),
      handle: 'alice.test',
    });
  });

  it('an unknown did:plc, or an unreachable directory: DID_RESOLUTION_FAILED', async () => {
    expect(await codeOf(resolveDid('did:plc:aaaaaaaaaaaaaaaaaaaaaaaa', opts()))).toBe('DID_RESOLUTION_FAILED');
    expect(await codeOf(resolveDid(alice.did, { plcUrl: 'http://127.0.0.1:1' }))).toBe('DID_RESOLUTION_FAILED');
    expect(await codeOf(resolveDid('not-a-did', opts()))).toBe('DID_INVALID');
  });

  it('resolves a did:web served on loopback (http allowed by option only)', async () => {
    const plcDoc = (await (await fetch(`${pds.plcUrl}/${alice.did}`)).json()) as Record<string, unknown>;
    let did = '';
    const server: Server = createServer((req, res) => {
      if (req.url !== '/.well-known/did.json') return void res.writeHead(404).end();
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...plcDoc, id: did }));
    });
    await new Promise<void>((r) => server.listen(0, r));
    try {
      did = `did:web:localhost%3A${(server.address() as AddressInfo).port}`;
      const id = await resolveDid(did, { didWebAllowHttpLoopback: true });
      const plcId = await resolveDid(alice.did, opts());
      expect(id).toEqual({ ...plcId, did });
      // The fetch policy: a loopback host is refused before anything is fetched, unless the operator allows it.
      expect(await codeOf(resolveDid(did, { timeoutMs: 2000 }))).toBe('DID_WEB_HOST_REFUSED');
      expect(
        await codeOf(resolveDid(`did:web:127.0.0.1%3A${(server.address() as AddressInfo).port}`, { timeoutMs: 2000 })),
      ).toBe('DID_WEB_HOST_REFUSED');
      expect(await codeOf(resolveDid(did, { timeoutMs: 2000, didWebAllowLoopback: true }))).toBe(
        'DID_RESOLUTION_FAILED',
      ); // allowed, but https on a plain-http port
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('resolves a handle through the PDS and checks the DID document claims it back', async () => {
    const id = await resolveHandle('Alice.Test', { ...opts(), handleResolverUrl: pds.pdsUrl });
    expect(id.did).toBe(alice.did);
    expect(await codeOf(resolveHandle('nobody.test', { ...opts(), handleResolverUrl: pds.pdsUrl }))).toBe(
      'HANDLE_RESOLUTION_FAILED',
    );
  });
});

describe('records and blobs', () => {
  let runtime: { uri: string; cid: string };
  let code: { uri: string; cid: string };
  let codeValue: JsonObject;
  const archive = new TextEncoder().encode('pretend this is a tar archive with one top-level directory\n'.repeat(50));

  beforeAll(async () => {
    runtime = await alice.publisher.putRecord(RUNTIME, 'python', {
      name: 'python',
      kind: 'language',
      protocolVersion: 1,
      createdAt: now(),
    });
    const blob = await alice.publisher.uploadBlob(archive, `application/${runtime.cid}`);
    codeValue = {
      $type: CODE,
      runtime: 'python',
      runtimeRecord: { uri: runtime.uri, cid: runtime.cid },
      blob: blob as unknown as JsonObject,
      entrypoint: 'app/main.py',
      pinned: { $link: runtime.cid },
      salt: { $bytes: Buffer.from([1, 2, 3, 250]).toString('base64').replace(/=+$/, '') },
      limits: { memoryBytes: 128 * 1024 * 1024, nested: [1, null, 'x'] },
      createdAt: now(),
    };
    code = await alice.publisher.putRecord(CODE, 'hello', codeValue);
  });

  it('fetches a record in strict and cid mode with the same, locally recomputed CID', async () => {
    const strict = await fetchRecord(code.uri, opts());
    const cid = await fetchRecord(code.uri, { ...opts(), mode: 'cid' });
    expect(strict.mode).toBe('strict');
    expect(strict.cid).toBe(code.cid);
    expect(cid.cid).toBe(code.cid);
    expect(cidForRecordJson(codeValue)).toBe(code.cid);
    expect(strict.value).toEqual(codeValue);
    expect(cid.value).toEqual(codeValue);
    expect(strict.commit?.rev).toMatch(/^[a-z2-7]{13}$/);
    expect(strict.uri).toBe(`at://${alice.did}/${CODE}/hello`);
  });

  it('keeps the blob mimeType application/<runtime-record-cid> exactly', async () => {
    const rec = await fetchRecord(code.uri, opts());
    const blob = rec.value.blob as { ref: { $link: string }; mimeType: string; size: number };
    expect(blob.mimeType).toBe(`application/${runtime.cid}`);
    expect(blob.size).toBe(archive.byteLength);
    expect(blob.ref.$link).toBe(cidForBlobBytes(archive));
  });

  it('fetches the blob and verifies its CID', async () => {
    const rec = await fetchRecord(code.uri, opts());
    const ref = (rec.value.blob as { ref: { $link: string } }).ref.$link;
    const got = await fetchBlob(alice.did, ref, opts());
    expect(Buffer.from(got.bytes).equals(Buffer.from(archive))).toBe(true);
    expect(got.cid).toBe(ref);
    expect(got.size).toBe(archive.byteLength);
  });

  it('blob errors: unknown CID, over the size cap, not a blob CID', async () => {
    expect(
      await codeOf(fetchBlob(alice.did, cidForBlobBytes(new TextEncoder().encode('never uploaded')), opts())),
    ).toBe('BLOB_NOT_FOUND');
    expect(await codeOf(fetchBlob(alice.did, cidForBlobBytes(archive), { ...opts(), maxBytes: 100 }))).toBe(
      'BLOB_TOO_LARGE',
    );
    expect(await codeOf(fetchBlob(alice.did, code.cid, opts()))).toBe('CID_INVALID');
  });

  it('a wrong expectCid: RECORD_CID_MISMATCH in both modes', async () => {
    for (const mode of ['strict', 'cid'] as const) {
      expect(await codeOf(fetchRecord(code.uri, { ...opts(), mode, expectCid: runtime.cid }))).toBe(
        'RECORD_CID_MISMATCH',
      );
      await expect(fetchRecord(code.uri, { ...opts(), mode, expectCid: code.cid })).resolves.toMatchObject({
        cid: code.cid,
      });
    }
  });

  it('a missing record: RECORD_NOT_FOUND in both modes (strict proves absence under the signed commit)', async () => {
    const uri = `at://${alice.did}/${CODE}/nope`;
    for (const mode of ['strict', 'cid'] as const)
      expect(await codeOf(fetchRecord(uri, { ...opts(), mode }))).toBe('RECORD_NOT_FOUND');
    await expect(fetchRecord(uri, opts())).rejects.toThrow(/absence proven under commit/);
  });

  it('a repo the PDS does not host: RECORD_NOT_FOUND; a PDS that does not answer: PDS_UNREACHABLE', async () => {
    const id = await resolveDid(alice.did, opts());
    const ghost = { ...id, did: 'did:plc:aaaaaaaaaaaaaaaaaaaaaaaa' };
    expect(await codeOf(fetchRecord(`at://${ghost.did}/${CODE}/hello`, { ...opts(), identity: ghost }))).toBe(
      'RECORD_NOT_FOUND',
    );
    expect(
      await codeOf(fetchRecord(code.uri, { ...opts(), identity: { ...id, pdsEndpoint: 'http://127.0.0.1:1' } })),
    ).toBe('PDS_UNREACHABLE');
  });

  it('accepts a handle authority when given a resolver, and returns the DID-based URI', async () => {
    const rec = await fetchRecord(`at://alice.test/${CODE}/hello`, { ...opts(), handleResolverUrl: pds.pdsUrl });
    expect(rec.uri).toBe(code.uri);
    expect(rec.cid).toBe(code.cid);
    expect(await codeOf(fetchRecord(`at://alice.test/${CODE}/hello`, opts()))).toBe('HANDLE_RESOLUTION_FAILED');
    // A pre-resolved identity is used only when it claims that handle.
    const id = await resolveDid(alice.did, opts());
    await expect(fetchRecord(`at://alice.test/${CODE}/hello`, { ...opts(), identity: id })).resolves.toMatchObject({
      uri: code.uri,
    });
    expect(await codeOf(fetchRecord(`at://bob.test/${CODE}/hello`, { ...opts(), identity: id }))).toBe(
      'HANDLE_RESOLUTION_FAILED',
    );
  });
});

describe('a lying PDS', () => {
  type Mode = 'pass' | 'forge-consistent' | 'forge-other-key' | 'other-repo' | 'json-inconsistent' | 'tamper-blob';
  let mode: Mode = 'pass';
  let proxy: PdsProxy;
  let victim: TestAccount;
  let mallory: TestAccount;
  let truth: { uri: string; cid: string };
  let blobCid: string;
  const honest = { runtime: 'python', entrypoint: 'app/main.py', createdAt: '2026-01-01T00:00:00.000Z' };
  const forged: JsonObject = {
    $type: CODE,
    runtime: 'python',
    entrypoint: 'app/evil.py',
    createdAt: '2026-01-01T00:00:00.000Z',
  };
  const blobBytes = new TextEncoder().encode('honest code archive bytes');

  const rewrite = async (path: string, up: ProxiedResponse): Promise<ProxiedResponse> => {
    const json = (v: unknown): ProxiedResponse => ({
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: new TextEncoder().encode(JSON.stringify(v)),
    });
    const car = (b: Uint8Array): ProxiedResponse => ({
      status: 200,
      headers: { 'content-type': 'application/vnd.ipld.car' },
      body: b,
    });
    const isJsonRecord = path.startsWith('/xrpc/com.atproto.repo.getRecord?');
    const isCarRecord = path.startsWith('/xrpc/com.atproto.sync.getRecord?');
    if (up.status !== 200) return up;
    switch (mode) {
      case 'forge-consistent': // value replaced, CID recomputed to match: self-consistent
        if (isJsonRecord) return json({ uri: truth.uri, cid: cidForRecordJson(forged), value: forged });
        if (isCarRecord) return car(await replaceRecordBlock(up.body, CODE, forged));
        return up;
      case 'forge-other-key': // a whole repo for the victim's DID, signed with a key the PDS made up
        if (isJsonRecord) return json({ uri: truth.uri, cid: cidForRecordJson(forged), value: forged });
        if (isCarRecord) return car(await forgeRecordProof(victim.did, CODE, 'hello', forged));
        return up;
      case 'other-repo': // a real, validly signed proof, but of mallory's repo
        if (isCarRecord) {
          const res = await fetch(
            `${pds.pdsUrl}/xrpc/com.atproto.sync.getRecord?did=${mallory.did}&collection=${CODE}&rkey=hello`,
          );
          return car(new Uint8Array(await res.arrayBuffer()));
        }
        return up;
      case 'json-inconsistent': // value replaced, CID left alone
        if (isJsonRecord) return json({ ...(JSON.parse(new TextDecoder().decode(up.body)) as object), value: forged });
        return up;
      case 'tamper-blob':
        if (path.startsWith('/xrpc/com.atproto.sync.getBlob?')) {
          const b = Uint8Array.from(up.body);
          b[0] = b[0]! ^ 0x20;
          return { ...up, body: b };
        }
        return up;
      default:
        return up;
    }
  };

  beforeAll(async () => {
    victim = await pds.createAccount('victim.test');
    mallory = await pds.createAccount('mallory.test');
    truth = await victim.publisher.putRecord(CODE, 'hello', honest);
    await mallory.publisher.putRecord(CODE, 'hello', forged);
    blobCid = (await victim.publisher.uploadBlob(blobBytes, 'application/octet-stream')).ref.$link;
    await victim.publisher.putRecord(CODE, 'with-blob', {
      ...honest,
      blob: {
        $type: 'blob',
        ref: { $link: blobCid },
        mimeType: 'application/octet-stream',
        size: blobBytes.byteLength,
      },
    });
    proxy = await startPdsProxy(pds.pdsUrl, rewrite);
    await pds.setPdsEndpoint(victim.did, proxy.url);
  });

  afterAll(async () => {
    await proxy?.close();
  });

  it("the victim's DID document now names the proxy, which is transparent when honest", async () => {
    mode = 'pass';
    expect((await resolveDid(victim.did, opts())).pdsEndpoint).toBe(proxy.url);
    const before = proxy.requests.length;
    const strict = await fetchRecord(truth.uri, opts());
    const cid = await fetchRecord(truth.uri, { ...opts(), mode: 'cid' });
    expect(strict.cid).toBe(truth.cid);
    expect(cid.cid).toBe(truth.cid);
    expect(strict.pdsEndpoint).toBe(proxy.url);
    expect(proxy.requests.length).toBe(before + 2);
    expect((await fetchBlob(victim.did, blobCid, opts())).cid).toBe(blobCid);
  });

  it('a consistent forgery passes cid mode alone, and strict mode rejects it: RECORD_PROOF_INVALID', async () => {
    mode = 'forge-consistent';
    const fooled = await fetchRecord(truth.uri, { ...opts(), mode: 'cid' });
    expect(fooled.value.entrypoint).toBe('app/evil.py');
    expect(fooled.cid).toBe(cidForRecordJson(forged));
    expect(await codeOf(fetchRecord(truth.uri, opts()))).toBe('RECORD_PROOF_INVALID');
    // cid mode does catch it once the caller pins the CID (a strong ref).
    expect(await codeOf(fetchRecord(truth.uri, { ...opts(), mode: 'cid', expectCid: truth.cid }))).toBe(
      'RECORD_CID_MISMATCH',
    );
  });

  it('a proof signed by a key that is not in the DID document: RECORD_SIGNATURE_INVALID', async () => {
    mode = 'forge-other-key';
    expect((await fetchRecord(truth.uri, { ...opts(), mode: 'cid' })).value.entrypoint).toBe('app/evil.py');
    expect(await codeOf(fetchRecord(truth.uri, opts()))).toBe('RECORD_SIGNATURE_INVALID');
  });

  it("another account's validly signed proof: RECORD_SIGNATURE_INVALID", async () => {
    mode = 'other-repo';
    expect(await codeOf(fetchRecord(truth.uri, opts()))).toBe('RECORD_SIGNATURE_INVALID');
  });

  it('an inconsistent JSON answer: RECORD_CID_MISMATCH in cid mode', async () => {
    mode = 'json-inconsistent';
    expect(await codeOf(fetchRecord(truth.uri, { ...opts(), mode: 'cid' }))).toBe('RECORD_CID_MISMATCH');
    await expect(fetchRecord(truth.uri, opts())).resolves.toMatchObject({ cid: truth.cid });
  });

  it('tampered blob bytes: BLOB_CID_MISMATCH', async () => {
    mode = 'tamper-blob';
    expect(await codeOf(fetchBlob(victim.did, blobCid, opts()))).toBe('BLOB_CID_MISMATCH');
  });
});

describe('aliases', () => {
  let v1: { uri: string; cid: string };
  let aliasUri: string;

  beforeAll(async () => {
    v1 = await alice.publisher.putRecord(CODE, 'greeter', {
      runtime: 'python',
      entrypoint: 'v1/main.py',
      createdAt: now(),
    });
    aliasUri = (
      await alice.publisher.putRecord(AT_RUN_V2.alias, 'greet', buildAliasRecord(v1) as unknown as JsonObject)
    ).uri;
  });

  it('resolves a code URI as itself and an alias one hop to the code record it pins', async () => {
    expect(await resolveCodeUri(v1.uri, opts())).toEqual({ codeUri: v1.uri });
    const r = await resolveCodeUri(aliasUri, opts());
    expect(r).toMatchObject({ codeUri: v1.uri, expectCid: v1.cid, via: { alias: { uri: aliasUri }, target: v1 } });
    await expect(fetchRecord(r.codeUri, { ...opts(), expectCid: r.expectCid })).resolves.toMatchObject({ cid: v1.cid });
  });

  it('follows the newest target after the alias is updated (no caching)', async () => {
    const reader = createAtprotoReader(opts());
    const before = await reader.resolveAlias(aliasUri);
    expect(before.target).toEqual(v1);
    const v2 = await alice.publisher.putRecord(CODE, 'greeter', {
      runtime: 'python',
      entrypoint: 'v2/main.py',
      createdAt: now(),
    });
    expect(v2.cid).not.toBe(v1.cid);
    // The alias still pins v1: fetching the code record with that pin now fails.
    expect(await codeOf(reader.fetchRecord(v1.uri, { expectCid: v1.cid }))).toBe('RECORD_CID_MISMATCH');
    await alice.publisher.putRecord(AT_RUN_V2.alias, 'greet', buildAliasRecord(v2) as unknown as JsonObject);
    const after = await reader.resolveAlias(aliasUri);
    expect(after.target).toEqual(v2);
    expect(after.alias.cid).not.toBe(before.alias.cid);
    const code = await reader.resolveCodeUri(aliasUri);
    expect((await reader.fetchRecord(code.codeUri, { expectCid: code.expectCid })).value.entrypoint).toBe('v2/main.py');
  });

  it('refuses an alias to an alias (ALIAS_INVALID) and a URI of another collection (URI_WRONG_COLLECTION)', async () => {
    const { uri } = await alice.publisher.putRecord(AT_RUN_V2.alias, 'loop', {
      target: { uri: aliasUri, cid: (await fetchRecord(aliasUri, opts())).cid },
      createdAt: now(),
    });
    expect(await codeOf(resolveAlias(uri, opts()))).toBe('ALIAS_INVALID');
    expect(await codeOf(resolveCodeUri(`at://${alice.did}/${RUNTIME}/python`, opts()))).toBe('URI_WRONG_COLLECTION');
    expect(await codeOf(resolveAlias(v1.uri, opts()))).toBe('URI_WRONG_COLLECTION');
  });
});

describe('publishing client', () => {
  it('logs in with identifier and password and writes records whose CIDs it checks', async () => {
    const pub = await createPublisher({ pdsUrl: pds.pdsUrl, identifier: 'alice.test', password: alice.password });
    expect(pub.did).toBe(alice.did);
    const created = await pub.putRecord(CODE, undefined, { runtime: 'python', entrypoint: 'a.py', createdAt: now() });
    expect(created.uri).toMatch(new RegExp(`^at://${alice.did}/${CODE}/[a-z2-7]{13}$`));
    expect((await fetchRecord(created.uri, opts())).cid).toBe(created.cid);
    expect(pub.session().accessJwt).toEqual(expect.any(String));
  });

  it('a wrong password: PUBLISH_AUTH_FAILED', async () => {
    expect(await codeOf(createPublisher({ pdsUrl: pds.pdsUrl, identifier: 'alice.test', password: 'wrong' }))).toBe(
      'PUBLISH_AUTH_FAILED',
    );
  });

  it('refuses bad records before writing, and reports a failed compare-and-swap', async () => {
    expect(await codeOf(alice.publisher.putRecord(CODE, 'float', { ratio: 0.5 }))).toBe('DATA_MODEL_INVALID');
    expect(await codeOf(alice.publisher.putRecord(CODE, 'typed', { $type: RUNTIME }))).toBe('RECORD_FIELDS_INVALID');
    expect(await codeOf(fetchRecord(`at://${alice.did}/${CODE}/float`, opts()))).toBe('RECORD_NOT_FOUND');
    const first = await alice.publisher.putRecord(CODE, 'cas', { n: 1 });
    await expect(alice.publisher.putRecord(CODE, 'cas', { n: 2 }, { swapRecord: first.cid })).resolves.toMatchObject({
      uri: first.uri,
    });
    try {
      await alice.publisher.putRecord(CODE, 'cas', { n: 3 }, { swapRecord: first.cid });
      expect.unreachable();
    } catch (err) {
      expect((err as AtprotoError).code).toBe('PUBLISH_FAILED');
      expect((err as AtprotoError).details?.error).toBe('InvalidSwap');
    }
  });

  it('uploads a blob with an unusual mimeType and keeps it', async () => {
    const bytes = new TextEncoder().encode('x'.repeat(1000));
    const mime = 'application/bafyreigdmqpykrgxyaxtlafqpqhzrb7qy2rh75nldvfd4tucqmi5xtwi6e';
    const ref = await alice.publisher.uploadBlob(bytes, mime);
    expect(ref).toEqual({ $type: 'blob', ref: { $link: cidForBlobBytes(bytes) }, mimeType: mime, size: 1000 });
    expect(await codeOf(alice.publisher.uploadBlob(bytes, 'not a mime'))).toBe('RECORD_FIELDS_INVALID');
  });

  it("writes an execution receipt and a runner record to the runner's repo", async () => {
    const runner = await pds.createAccount('runner.test');
    const policy: RunnerPolicy = {
      protocolVersions: [1],
      runtimeKinds: ['language'],
      platforms: [{ os: 'linux', architecture: 'amd64' }],
      isolation: { backend: 'docker', ociRuntime: 'runc', strong: false },
      sandboxImage: `localhost:5000/sandbox@sha256:${'b'.repeat(64)}`,
      limits: {
        maxMemoryBytes: 512 << 20,
        maxPids: 128,
        maxMilliCpus: 1000,
        maxTimeoutMs: 60_000,
        maxCodeBlobBytes: 10 << 20,
        maxRuntimeArchiveBytes: 200 << 20,
        network: 'none',
      },
    };
    const runnerRef = await putRunnerRecord(runner.publisher, policy);
    expect(runnerRef.uri).toBe(`at://${runner.did}/${AT_RUN_V2.runner}/self`);
    const runnerRec = await fetchRecord(runnerRef.uri, opts());
    expect(runnerRec.value).toEqual({
      ...buildRunnerRecord(policy, { createdAt: runnerRec.value.createdAt as string }),
    });

    const code = await alice.publisher.putRecord(CODE, 'receipted', {
      runtime: 'python',
      entrypoint: 'main.py',
      createdAt: now(),
    });
    const rt = await alice.publisher.putRecord(RUNTIME, 'python-receipt', { name: 'python', createdAt: now() });
    const receipt: ExecutionReceipt = {
      executionId: 'exec_01J9Z3K4M5N6P7Q8R9S0T1V2W3',
      code,
      runtime: rt,
      codeBlobCid: cidForBlobBytes(new TextEncoder().encode('archive')),
      handler: 'greet',
      images: { runtime: `localhost:5000/runtime-python@sha256:${'a'.repeat(64)}`, sandbox: policy.sandboxImage },
      limits: { memoryBytes: 256 << 20, pids: 64, timeoutMs: 30_000, network: 'none' },
      inputSha256: sha256Hex('{"name":"Ada"}'),
      outputSha256: sha256Hex('{"greeting":"Hello, Ada"}'),
      outcome: 'succeeded',
      runner: runnerRef,
      startedAt: '2026-01-01T00:00:00.000Z',
      finishedAt: '2026-01-01T00:00:00.420Z',
    };
    const written = await writeExecutionReceipt(runner.publisher, receipt);
    expect(written.uri).toBe(`at://${runner.did}/${AT_RUN_V2.execution}/${receipt.executionId}`);
    const back = await fetchRecord(written.uri, opts());
    expect(back.cid).toBe(written.cid);
    expect(back.value).toEqual(buildExecutionRecord(receipt));
    // Rewriting after a crash replaces the same record.
    const again = await writeExecutionReceipt(runner.publisher, receipt);
    expect(again).toEqual(written);
  });
});

/** The local addresses listening on a TCP port of this machine (/proc/net/tcp and tcp6): IPv4 dotted, IPv6 as hex. */
function listeners(port: number): string[] {
  const out: string[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').trim().split('\n').slice(1)) {
      const [, local = '', , state] = line.trim().split(/\s+/);
      const [addr = '', hexPort = ''] = local.split(':');
      if (state !== '0A' || Number.parseInt(hexPort, 16) !== port) continue; // 0A: LISTEN
      out.push(
        addr.length === 8
          ? (addr.match(/../g) ?? [])
              .reverse()
              .map((b) => Number.parseInt(b, 16))
              .join('.')
          : `ipv6 ${addr}`,
      );
    }
  }
  return out;
}

describe('the embedded network', () => {
  it('its PDS and PLC directory listen on 127.0.0.1 only, never on every interface', () => {
    for (const url of [pds.pdsUrl, pds.plcUrl])
      expect(listeners(Number(new URL(url).port)), url).toEqual(['127.0.0.1']);
  });
});
