// A real PDS + PLC directory, in process (@atproto/dev-env TestNetworkNoAppView), for integration tests.
// The PDS writes its data and blob directories under os.tmpdir() and never removes them, so it is created
// with TMPDIR pointing at a fresh directory of ours, which close() removes.
//
//   const pds = await startTestPds();
//   const alice = await pds.createAccount('alice.test');   // { did, handle, password, accessJwt, refreshJwt, publisher }
//   await alice.publisher.putRecord(collection, rkey, record);
//   await pds.close();

import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { publishCode, publishRuntime } from '../../src/supervisor/executions/publishing.ts';
import {
  AT_RUN_V2,
  startLocalNetwork,
  type LocalAccount,
  type LocalNetwork,
} from '../../src/adapters/atproto/index.ts';
import { imageRef } from './docker.ts';

/** The test PDS is runlog's embedded network (src/adapters/atproto/local-network.ts). */
export type TestAccount = LocalAccount;
export type TestPds = LocalNetwork;

const SETUP_HINT = 'the in-process PDS (@atproto/dev-env) could not start; run `npm ci` / `npm run setup`';

/** The embedded network runlog ships (src/adapters/atproto/local-network.ts), failing with a setup hint. */
export async function startTestPds(): Promise<TestPds> {
  try {
    return await startLocalNetwork();
  } catch (err) {
    throw new Error(`${SETUP_HINT}: ${(err as Error).message}`, { cause: err });
  }
}

/** The Node.js runtime (runtimes/node, image runtime-node from the local registry) published by an account of its own. */
export async function publishNodeRuntime(pds: TestPds, handle: string): Promise<string> {
  const publisher = await pds.createAccount(handle);
  return (
    await publishRuntime(publisher.publisher, {
      dir: join(import.meta.dirname, '../../runtimes/node'),
      image: imageRef('runtime-node'),
    })
  ).uri;
}

/** Code (`source` as index.mjs in a fresh directory under `root`) published on `runtimeUri` by a new account `handle`; its record's URI. */
export async function publishCodeSource(
  pds: TestPds,
  handle: string,
  root: string,
  runtimeUri: string,
  source: string,
): Promise<string> {
  const acct = await pds.createAccount(handle);
  const dir = mkdtempSync(join(root, 'code-'));
  writeFileSync(join(dir, 'index.mjs'), source);
  return (
    await publishCode(acct.publisher, {
      dir,
      runtime: runtimeUri,
      entrypoint: 'index.mjs',
      atproto: { plcUrl: pds.plcUrl },
    })
  ).uri;
}

export interface ProxiedResponse {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
}

export interface PdsProxy {
  url: string;
  /** Requests seen, as path + query. */
  requests: string[];
  close(): Promise<void>;
}

/** A receipt as the PDS lists it: its URI, and the fields the job tests read. */
export interface ListedReceipt {
  uri: string;
  value: { job?: { uri: string; cid: string }; outcome?: string; failure?: { kind?: string; code?: string } };
}

/** Every execution receipt in `did`'s repo, a page at a time, as the PDS lists them. */
export async function listReceipts(pds: Pick<TestPds, 'pdsUrl'>, did: string): Promise<ListedReceipt[]> {
  const out: ListedReceipt[] = [];
  let cursor: string | undefined;
  do {
    const q = new URLSearchParams({ repo: did, collection: AT_RUN_V2.execution, limit: '100' });
    if (cursor) q.set('cursor', cursor);
    const res = await fetch(`${pds.pdsUrl}/xrpc/com.atproto.repo.listRecords?${q}`);
    const page = (await res.json()) as { records: ListedReceipt[]; cursor?: string };
    out.push(...page.records);
    cursor = page.records.length > 0 ? page.cursor : undefined;
  } while (cursor);
  return out;
}

/**
 * An HTTP proxy on 127.0.0.1 in front of `target` that lets a test rewrite answers (a lying PDS).
 * `rewrite` gets the request path+query and the upstream answer, and returns the answer to serve.
 */
export async function startPdsProxy(
  target: string,
  rewrite: (pathAndQuery: string, upstream: ProxiedResponse) => ProxiedResponse | Promise<ProxiedResponse>,
): Promise<PdsProxy> {
  const requests: string[] = [];
  const server = createServer((req, res) => {
    const path = req.url ?? '/';
    requests.push(path);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        try {
          const headers = forwardable(req.headers);
          const up = await fetch(new URL(path, target), {
            method: req.method ?? 'GET',
            headers,
            ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
            redirect: 'manual',
          });
          const upHeaders: Record<string, string> = {};
          up.headers.forEach((v, k) => {
            if (k !== 'content-length' && k !== 'transfer-encoding' && k !== 'content-encoding' && k !== 'connection')
              upHeaders[k] = v;
          });
          const answer = await rewrite(path, {
            status: up.status,
            headers: upHeaders,
            body: new Uint8Array(await up.arrayBuffer()),
          });
          res.writeHead(answer.status, { ...answer.headers, 'content-length': String(answer.body.byteLength) });
          res.end(answer.body);
        } catch (err) {
          res.writeHead(502, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ error: 'ProxyError', message: (err as Error).message }));
        }
      })();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((err) => (err ? reject(err) : resolve()));
      }),
  };
}

function forwardable(h: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) {
    if (v === undefined || k === 'host' || k === 'connection' || k === 'content-length' || k === 'accept-encoding')
      continue;
    out[k] = Array.isArray(v) ? v.join(', ') : v;
  }
  return out;
}

// ---- Forgery kit for "lying PDS" tests -------------------------------------------------------------------

/**
 * A com.atproto.sync.getRecord CAR for `did` holding `record` at collection/rkey, built in memory by a
 * repo signed with a fresh key (not the DID's): what a PDS without the account key could serve.
 */
export async function forgeRecordProof(
  did: string,
  collection: string,
  rkey: string,
  record: Record<string, unknown>,
): Promise<Uint8Array> {
  const { Repo, MemoryBlockstore, WriteOpAction, getRecords, concatBytesAsync } = await import('@atproto/repo');
  const { Secp256k1Keypair } = await import('@atproto/crypto');
  const storage = new MemoryBlockstore();
  const keypair = await Secp256k1Keypair.create();
  const repo = await Repo.create(storage, did, keypair, [
    { action: WriteOpAction.Create, collection, rkey, record: record as never },
  ] as never);
  return concatBytesAsync(getRecords(storage, repo.cid, [{ collection, rkey }]));
}

/**
 * Rewrites a real getRecord CAR: every block that decodes to a map with `$type === collection` is replaced
 * by `forged` (stored under its own, correct CID). The commit and MST are left untouched.
 */
export async function replaceRecordBlock(
  car: Uint8Array,
  collection: string,
  forged: Record<string, unknown>,
): Promise<Uint8Array> {
  const { readCarWithRoot, blocksToCarFile, cborToLex } = await import('@atproto/repo');
  const { root, blocks } = await readCarWithRoot(car);
  let replaced = 0;
  for (const [cid, bytes] of [...blocks]) {
    let value: unknown;
    try {
      value = cborToLex(bytes);
    } catch {
      continue;
    }
    if (value && typeof value === 'object' && (value as Record<string, unknown>).$type === collection) {
      blocks.delete(cid);
      replaced++;
    }
  }
  if (replaced === 0) throw new Error(`replaceRecordBlock: no ${collection} block in the CAR`);
  await blocks.add(forged as never);
  return blocksToCarFile(root, blocks);
}
