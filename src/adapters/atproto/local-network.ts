// The embedded default AT Protocol network: a PLC directory and a PDS in this process
// (@atproto/dev-env TestNetworkNoAppView), for the first run and for tests. Real XRPC over HTTP on
// loopback, no outside network. The PDS writes under os.tmpdir(), so TMPDIR points at a directory of
// ours while it starts, and close() removes it. @atproto/dev-env is a devDependency (hundreds of packages a
// library user does not need): it is loaded only here, when present, else a one-line error says how to add it.
import { mkdtemp, rm } from 'node:fs/promises';
import { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RunlogError } from '../../domain/errors.ts';
import { createPublisher, type Publisher } from './publisher.ts';

export interface LocalAccount {
  did: string;
  handle: string;
  password: string;
  accessJwt: string;
  refreshJwt: string;
  publisher: Publisher;
}

export interface LocalNetwork {
  pdsUrl: string;
  plcUrl: string;
  createAccount(handle: string): Promise<LocalAccount>;
  /** Re-points a DID's #atproto_pds service with a PLC operation signed by the PDS's rotation key (tests of lying PDSes). */
  setPdsEndpoint(did: string, endpoint: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * Creates an account on a local PDS through its XRPC (a `.test` handle unless one with a dot is given, a random
 * password) and signs its publisher in: what the in-process network and the bench's PDS process both hand out.
 */
export async function createLocalAccount(pdsUrl: string, handle: string): Promise<LocalAccount> {
  const h = handle.includes('.') ? handle.toLowerCase() : `${handle.toLowerCase()}.test`;
  const password = `pw-${Math.random().toString(36).slice(2)}${Math.random().toString(36).slice(2)}`;
  const res = await fetch(`${pdsUrl}/xrpc/com.atproto.server.createAccount`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ handle: h, email: `${h.replace(/\./g, '-')}@example.test`, password }),
  });
  const body = (await res.json()) as Record<string, string>;
  if (!res.ok) throw new Error(`createAccount ${h}: HTTP ${res.status} ${JSON.stringify(body)}`);
  const session = { did: body.did!, handle: h, accessJwt: body.accessJwt!, refreshJwt: body.refreshJwt! };
  return { ...session, password, publisher: await createPublisher({ pdsUrl, session }) };
}

export async function startLocalNetwork(opts: { dataDir?: string } = {}): Promise<LocalNetwork> {
  const devEnv = await loadDevEnv();
  const dir = await mkdtemp(join(opts.dataDir ?? tmpdir(), 'runlog-pds-'));
  const saved = process.env.TMPDIR;
  let network: InstanceType<typeof devEnv.TestNetworkNoAppView>;
  try {
    process.env.TMPDIR = dir;
    network = await onLoopback(() => devEnv.TestNetworkNoAppView.create({}));
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
  const pdsUrl = network.pds.url;
  let closed = false;
  return {
    pdsUrl,
    plcUrl: network.plc.url,
    createAccount: (handle) => createLocalAccount(pdsUrl, handle),
    async setPdsEndpoint(did, endpoint) {
      const ctx = network.pds.ctx;
      await ctx.plcClient.updatePds(did, ctx.plcRotationKey, endpoint);
    },
    async close() {
      if (closed) return;
      closed = true;
      try {
        await network.close();
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
  };
}

/**
 * Runs `start` with every `listen(port)` that names no host bound to 127.0.0.1. The dev-env's PLC and PDS call
 * `app.listen(port)`, which Node binds to every interface, and neither takes a host option: the embedded network
 * must be reachable from this machine only, like everything else runlog opens. A listen that names its host (or a
 * path, or an options object) is left as it is; the original is back once `start` settles.
 */
async function onLoopback<T>(start: () => Promise<T>): Promise<T> {
  // why: listen's overloads cannot be re-declared as one function; the wrapper passes every argument on unchanged
  const proto = Server.prototype as unknown as { listen: (...args: unknown[]) => unknown };
  const original = proto.listen;
  proto.listen = function (this: Server, ...args: unknown[]) {
    const portOnly = typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]));
    if (portOnly && (args.length === 1 || typeof args[1] === 'function'))
      return original.call(this, Number(args[0]), '127.0.0.1', ...args.slice(1));
    return original.apply(this, args);
  };
  try {
    return await start();
  } finally {
    proto.listen = original;
  }
}

/** The pinned range of package.json's devDependencies: what a project that installed runlog adds to get the embedded PDS. */
export const DEV_ENV_SPEC = '@atproto/dev-env@~0.6.7';

/** Throws DEV_ENV_MISSING (one line saying how to add it) unless @atproto/dev-env can be loaded. */
export async function requireDevEnv(): Promise<void> {
  await loadDevEnv();
}

// Not exported: its type names @atproto/dev-env, which the shipped declarations must not need.
async function loadDevEnv(): Promise<typeof import('@atproto/dev-env')> {
  try {
    return await import('@atproto/dev-env');
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (e.code === 'ERR_MODULE_NOT_FOUND' && /'@atproto\/dev-env'/.test(e.message)) {
      throw new RunlogError(
        'DEV_ENV_MISSING',
        'the embedded PDS and PLC directory need @atproto/dev-env, which is not installed: ' +
          `add it with \`npm install --save-dev ${DEV_ENV_SPEC}\``,
      );
    }
    throw err;
  }
}
