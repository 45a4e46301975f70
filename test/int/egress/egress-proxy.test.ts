// The egress proxy on loopback, no Docker (docs/decisions/0012): each "execution" is a grant bound to its own
// 127.0.0.x address, the proxy resolves names with a DNS server this test starts, and every destination is an HTTP
// server this test starts on 127.0.0.1 (which the grant reaches only because its allowRanges names 127.0.0.0/8).
// A granted name answers through CONNECT and plain HTTP; an ungranted name, a name that rebinds to a forbidden
// address, a direct IP, bytes past the limit, time past the limit, too many connections and DNS to the proxy are
// refused or cut, and each attempt is in the reports.
import { randomBytes } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { egressControl, type EgressReport } from '../../../src/adapters/egress/control-client.ts';
import { startEgressProxy, type EgressProxy } from '../../../src/adapters/egress/proxy/egress-proxy.ts';
import type { NetworkGrant } from '../../../src/domain/at-run/egress-grant.ts';
import { startDnsTestServer, type DnsTestServer } from '../../support/dns-test-server.ts';

const TOKEN = randomBytes(24).toString('hex');
let upstream: Server;
let upstreamPort: number;
let hits: string[] = [];
let dns: DnsTestServer;
let proxy: EgressProxy;
let control: ReturnType<typeof egressControl>;

/** A grant for api.test and friends on the upstream's port, loopback allowed, with `limits` over roomy defaults. */
function grantWith(limits: Partial<NetworkGrant['limits']> = {}): NetworkGrant {
  return {
    destinations: [
      { host: 'api.test', ports: [upstreamPort] },
      { host: '*.granted.test', ports: [upstreamPort] },
      { host: 'rebind.test', ports: [upstreamPort] },
      { host: 'meta.test', ports: [upstreamPort] },
      { host: 'mixed.test', ports: [upstreamPort] },
    ],
    allowRanges: ['127.0.0.0/8'],
    limits: { bytes: 1_000_000, seconds: 60, connections: 8, ...limits },
  };
}

beforeAll(async () => {
  upstream = createServer((req, res) => {
    hits.push(`${req.method} ${req.url}`);
    const url = new URL(req.url ?? '/', 'http://upstream');
    if (url.pathname === '/big') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const n = Number(url.searchParams.get('n'));
      for (let sent = 0; sent < n; sent += 4096) res.write(Buffer.alloc(Math.min(4096, n - sent), 120));
      res.end();
    } else if (url.pathname === '/slow') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('waiting');
    } else {
      // Asked for, hop-by-hop headers of the upstream's own, which must stop at the proxy.
      const hop = req.headers['x-want-hop'] ? { connection: 'x-upstream-hop', 'x-upstream-hop': '1' } : {};
      res.writeHead(200, { 'content-type': 'application/json', 'keep-alive': 'timeout=77', ...hop });
      res.end(JSON.stringify({ method: req.method, url: req.url, headers: req.headers }));
    }
  });
  await new Promise<void>((resolve) => upstream.listen({ host: '127.0.0.1', port: 0 }, resolve));
  upstreamPort = (upstream.address() as AddressInfo).port;
  dns = await startDnsTestServer((name, nth) => {
    if (name === 'api.test' || name.endsWith('.granted.test') || name === 'other.test') return ['127.0.0.1'];
    if (name === 'rebind.test') return nth === 1 ? ['127.0.0.1'] : ['169.254.169.254'];
    if (name === 'meta.test') return ['169.254.169.254'];
    if (name === 'mixed.test') return ['127.0.0.1', '10.9.9.9'];
    return [];
  });
  proxy = await startEgressProxy({
    control: { host: '127.0.0.1', port: 0 },
    proxyPort: 0,
    dnsPort: 0,
    resolvers: [`127.0.0.1:${dns.port}`],
    token: TOKEN,
    resolveTimeoutMs: 2000,
    connectTimeoutMs: 2000,
    maxReports: 10_000,
    maxReportsPerGrant: 1000,
  });
  control = egressControl({ baseUrl: `http://127.0.0.1:${proxy.control.port}`, token: TOKEN });
});

afterAll(async () => {
  await proxy?.close();
  await dns?.close();
  upstream?.closeAllConnections();
  await new Promise<void>((resolve) => (upstream ? upstream.close(() => resolve()) : resolve()));
});

interface Answer {
  status: number;
  headers: IncomingMessage['headers'];
  body: string;
}

/** A plain-HTTP proxy request for `url` to the proxy at `at`. Rejects when the connection is cut. */
function viaProxy(at: { address: string; port: number }, url: string, headers: Record<string, string> = {}) {
  return new Promise<Answer>((resolve, reject) => {
    const req = request({ host: at.address, port: at.port, path: url, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }),
      );
      res.on('error', reject);
      res.on('aborted', () => reject(new Error('aborted')));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A CONNECT to `authority`: the proxy's answer, and the tunnel when it opened one. */
function tunnel(at: { address: string; port: number }, authority: string) {
  return new Promise<{ status: number; headers: IncomingMessage['headers']; body: string; socket?: Socket }>(
    (resolve, reject) => {
      const req = request({ host: at.address, port: at.port, method: 'CONNECT', path: authority, agent: false });
      req.on('connect', (res, socket, head: Buffer) => {
        if (res.statusCode === 200) return resolve({ status: 200, headers: res.headers, body: '', socket });
        const chunks: Buffer[] = [head];
        socket.on('data', (c: Buffer) => chunks.push(c));
        socket.on('close', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }),
        );
      });
      req.on('error', reject);
      req.end();
    },
  );
}

/** Sends an HTTP/1.1 GET through an open tunnel and reads until the tunnel closes. */
function getThrough(socket: Socket, path: string): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('close', () => resolve(Buffer.concat(chunks).toString()));
    socket.on('error', () => {});
    socket.write(`GET ${path} HTTP/1.1\r\nhost: api.test\r\nconnection: close\r\n\r\n`);
  });
}

/** Every report of `key` so far. */
async function reportsOf(key: string): Promise<EgressReport[]> {
  return (await control.reports({ key, limit: 1000 })).reports;
}

let nextAddress = 2;
/** Registers `grant` under `key` on a fresh 127.0.0.x address. */
async function register(key: string, grant: NetworkGrant) {
  const registered = await control.putGrant(key, `127.0.0.${nextAddress++}`, grant);
  return { ...registered, at: { address: registered.address, port: registered.proxyPort } };
}

describe('a granted name', () => {
  it('answers through plain HTTP, without the proxy headers, and the reports say so', async () => {
    const g = await register('exec-http', grantWith());
    const answer = await viaProxy(g.at, `http://API.test:${upstreamPort}/echo?x=1`, {
      'proxy-authorization': 'Basic c2VjcmV0',
      'proxy-connection': 'keep-alive',
      'x-drop-me': 'yes',
      connection: 'x-drop-me',
      'x-kept': 'kept',
      'x-want-hop': '1',
    });
    expect(answer.status).toBe(200);
    const seen = JSON.parse(answer.body) as { url: string; headers: Record<string, string> };
    expect(seen.url).toBe('/echo?x=1');
    expect(seen.headers.host).toBe(`api.test:${upstreamPort}`);
    expect(seen.headers['x-kept']).toBe('kept');
    for (const h of ['proxy-authorization', 'proxy-connection', 'x-drop-me'])
      expect(seen.headers).not.toHaveProperty(h);
    // The upstream's hop-by-hop headers stop at the proxy (its own Keep-Alive with the client is its own).
    expect(answer.headers).not.toHaveProperty('x-upstream-hop');
    expect(answer.headers['keep-alive']).not.toBe('timeout=77');
    const reports = await reportsOf('exec-http');
    expect(reports.map((r) => [r.kind, r.decision, r.host, r.address])).toEqual([
      ['http', 'allowed', 'api.test', '127.0.0.1'],
      ['http', 'closed', 'api.test', '127.0.0.1'],
    ]);
    expect(reports[1]!.bytesDown).toBeGreaterThan(answer.body.length);
    const { usage } = await control.deleteGrant('exec-http');
    expect(usage).toMatchObject({ connections: 1, refused: 0, stopped: null });
    expect(usage.bytesUp + usage.bytesDown).toBe(reports[1]!.bytesUp + reports[1]!.bytesDown);
  });

  it('answers through a CONNECT tunnel, to a wildcard-granted name too', async () => {
    const g = await register('exec-connect', grantWith());
    for (const name of ['api.test', 'a.b.granted.test']) {
      const t = await tunnel(g.at, `${name}:${upstreamPort}`);
      expect(t.status).toBe(200);
      const raw = await getThrough(t.socket!, '/echo');
      expect(raw).toMatch(/^HTTP\/1\.1 200 OK/);
      expect(raw).toContain('"url":"/echo"');
    }
    await expect
      .poll(async () => (await reportsOf('exec-connect')).filter((r) => r.decision === 'closed').length)
      .toBe(2);
    const reports = await reportsOf('exec-connect');
    expect(reports.filter((r) => r.decision === 'allowed').map((r) => [r.kind, r.host, r.port])).toEqual([
      ['connect', 'api.test', upstreamPort],
      ['connect', 'a.b.granted.test', upstreamPort],
    ]);
    await control.deleteGrant('exec-connect');
  });
});

describe('refused', () => {
  it('an ungranted name, which the proxy does not even resolve', async () => {
    const g = await register('exec-ungranted', grantWith());
    const before = dns.asked.length;
    const plain = await viaProxy(g.at, `http://other.test:${upstreamPort}/`);
    expect(plain.status).toBe(403);
    expect(plain.headers['x-egress-refused']).toBe('EGRESS_HOST_NOT_GRANTED');
    const t = await tunnel(g.at, `other.test:${upstreamPort}`);
    expect(t.status).toBe(403);
    expect(JSON.parse(t.body)).toMatchObject({ error: { code: 'EGRESS_HOST_NOT_GRANTED' } });
    // The bare suffix of a wildcard is not granted either, nor a granted name on another port.
    expect((await tunnel(g.at, `granted.test:${upstreamPort}`)).headers['x-egress-refused']).toBe(
      'EGRESS_HOST_NOT_GRANTED',
    );
    expect((await tunnel(g.at, `api.test:${upstreamPort === 1 ? 2 : 1}`)).headers['x-egress-refused']).toBe(
      'EGRESS_PORT_NOT_GRANTED',
    );
    expect(dns.asked.slice(before)).toEqual([]);
    const reports = await reportsOf('exec-ungranted');
    expect(reports.map((r) => [r.kind, r.decision, r.code])).toEqual([
      ['http', 'refused', 'EGRESS_HOST_NOT_GRANTED'],
      ['connect', 'refused', 'EGRESS_HOST_NOT_GRANTED'],
      ['connect', 'refused', 'EGRESS_HOST_NOT_GRANTED'],
      ['connect', 'refused', 'EGRESS_PORT_NOT_GRANTED'],
    ]);
    await control.deleteGrant('exec-ungranted');
  });

  it('a granted name that resolves to a forbidden address, the second time (rebinding)', async () => {
    const g = await register('exec-rebind', grantWith());
    hits = [];
    const first = await viaProxy(g.at, `http://rebind.test:${upstreamPort}/echo`);
    expect(first.status).toBe(200);
    const second = await viaProxy(g.at, `http://rebind.test:${upstreamPort}/echo`);
    expect(second.status).toBe(403);
    expect(second.headers['x-egress-refused']).toBe('EGRESS_ADDRESS_FORBIDDEN');
    expect(JSON.parse(second.body).error.message).toContain('169.254.169.254 is metadata');
    const t = await tunnel(g.at, `meta.test:${upstreamPort}`);
    expect(t.headers['x-egress-refused']).toBe('EGRESS_ADDRESS_FORBIDDEN');
    // One forbidden address among allowed ones refuses the name.
    const mixed = await viaProxy(g.at, `http://mixed.test:${upstreamPort}/echo`);
    expect(mixed.headers['x-egress-refused']).toBe('EGRESS_ADDRESS_FORBIDDEN');
    expect(hits).toEqual(['GET /echo']);
    const refused = (await reportsOf('exec-rebind')).filter((r) => r.decision === 'refused');
    expect(refused.map((r) => [r.host, r.code])).toEqual([
      ['rebind.test', 'EGRESS_ADDRESS_FORBIDDEN'],
      ['meta.test', 'EGRESS_ADDRESS_FORBIDDEN'],
      ['mixed.test', 'EGRESS_ADDRESS_FORBIDDEN'],
    ]);
    await control.deleteGrant('exec-rebind');
  });

  it('a direct IP, in every form', async () => {
    const g = await register('exec-ip', grantWith());
    hits = [];
    for (const url of [
      `http://127.0.0.1:${upstreamPort}/`,
      `http://0x7f.1:${upstreamPort}/`,
      `http://2130706433:${upstreamPort}/`,
      `http://[::1]:${upstreamPort}/`,
    ]) {
      const a = await viaProxy(g.at, url);
      expect(a.headers['x-egress-refused'], url).toBe('EGRESS_DIRECT_IP');
    }
    for (const authority of [`127.0.0.1:${upstreamPort}`, `[::1]:${upstreamPort}`, `0x7f.1:${upstreamPort}`]) {
      const t = await tunnel(g.at, authority);
      expect(t.headers['x-egress-refused'], authority).toBe('EGRESS_DIRECT_IP');
    }
    expect(hits).toEqual([]);
    const reports = await reportsOf('exec-ip');
    expect(reports).toHaveLength(7);
    expect(reports.every((r) => r.decision === 'refused' && r.code === 'EGRESS_DIRECT_IP')).toBe(true);
    await control.deleteGrant('exec-ip');
  });

  it('a request that is not a proxy request', async () => {
    const g = await register('exec-garbage', grantWith());
    const origin = await viaProxy(g.at, '/echo');
    expect(origin.headers['x-egress-refused']).toBe('EGRESS_REQUEST_INVALID');
    const https = await viaProxy(g.at, `https://api.test:${upstreamPort}/`);
    expect(JSON.parse(https.body).error.message).toContain('use CONNECT');
    await new Promise<void>((resolve) => {
      const s = connect({ host: g.address, port: g.proxyPort }, () => s.write('\x16\x03\x01 not http at all\r\n\r\n'));
      s.on('data', () => {});
      s.on('close', () => resolve());
      s.on('error', () => {});
    });
    await expect.poll(async () => (await reportsOf('exec-garbage')).length).toBe(3);
    expect((await reportsOf('exec-garbage')).map((r) => r.code)).toEqual([
      'EGRESS_REQUEST_INVALID',
      'EGRESS_REQUEST_INVALID',
      'EGRESS_REQUEST_INVALID',
    ]);
    await control.deleteGrant('exec-garbage');
  });

  it('bytes past the limit: the connection is cut, the next one refused', async () => {
    const g = await register('exec-bytes', grantWith({ bytes: 100_000 }));
    const small = await viaProxy(g.at, `http://api.test:${upstreamPort}/big?n=1000`);
    expect(small.body).toHaveLength(1000);
    await expect(viaProxy(g.at, `http://api.test:${upstreamPort}/big?n=200000`)).rejects.toThrow();
    const t = await tunnel(g.at, `api.test:${upstreamPort}`);
    expect(t.headers['x-egress-refused']).toBe('EGRESS_BYTES_EXCEEDED');
    await expect.poll(async () => (await reportsOf('exec-bytes')).some((r) => r.decision === 'cut')).toBe(true);
    const reports = await reportsOf('exec-bytes');
    expect(reports.map((r) => [r.decision, r.code ?? null])).toEqual([
      ['allowed', null],
      ['closed', null],
      ['allowed', null],
      ['cut', 'EGRESS_BYTES_EXCEEDED'],
      ['refused', 'EGRESS_BYTES_EXCEEDED'],
    ]);
    const { usage } = await control.deleteGrant('exec-bytes');
    expect(usage.stopped).toBe('EGRESS_BYTES_EXCEEDED');
    // The chunk that would overspend the budget is not forwarded: what passed is within it.
    expect(usage.bytesUp + usage.bytesDown).toBeLessThanOrEqual(100_000);
    expect(usage.bytesDown).toBeGreaterThan(1000);
  });

  it('time past the limit: the open tunnel is cut, the next one refused', async () => {
    const g = await register('exec-time', grantWith({ seconds: 1 }));
    const t = await tunnel(g.at, `api.test:${upstreamPort}`);
    expect(t.status).toBe(200);
    const closed = getThrough(t.socket!, '/slow');
    expect(await closed).toContain('waiting');
    const after = await tunnel(g.at, `api.test:${upstreamPort}`);
    expect(after.headers['x-egress-refused']).toBe('EGRESS_TIME_EXCEEDED');
    const reports = await reportsOf('exec-time');
    expect(reports.map((r) => [r.decision, r.code ?? null])).toEqual([
      ['allowed', null],
      ['cut', 'EGRESS_TIME_EXCEEDED'],
      ['refused', 'EGRESS_TIME_EXCEEDED'],
    ]);
    expect((await control.deleteGrant('exec-time')).usage.stopped).toBe('EGRESS_TIME_EXCEEDED');
  });

  it('connections past the limit', async () => {
    const g = await register('exec-conns', grantWith({ connections: 1 }));
    const first = await tunnel(g.at, `api.test:${upstreamPort}`);
    expect(first.status).toBe(200);
    const second = await tunnel(g.at, `api.test:${upstreamPort}`);
    expect(second.status).toBe(429);
    expect(second.headers['x-egress-refused']).toBe('EGRESS_CONNECTIONS_EXCEEDED');
    first.socket!.destroy();
    await expect.poll(async () => (await reportsOf('exec-conns')).some((r) => r.decision === 'closed')).toBe(true);
    const third = await tunnel(g.at, `api.test:${upstreamPort}`);
    expect(third.status).toBe(200);
    third.socket!.destroy();
    await control.deleteGrant('exec-conns');
  });

  it('DNS to the proxy, over UDP and TCP, answered REFUSED', async () => {
    const g = await register('exec-dns', grantWith());
    const resolver = new Resolver({ timeout: 2000, tries: 1 });
    resolver.setServers([`${g.address}:${g.dnsPort}`]);
    await expect(resolver.resolve4('api.test')).rejects.toMatchObject({ code: 'EREFUSED' });
    const tcpAnswer = await new Promise<Buffer>((resolve, reject) => {
      const query = Buffer.from([
        0, 22, 0xab, 0xcd, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 4, 0x6c, 0x65, 0x61, 0x6b, 0, 0, 16, 0, 1,
      ]);
      const s = connect({ host: g.address, port: g.dnsPort }, () => s.write(query));
      s.once('data', (d: Buffer) => {
        resolve(d);
        s.destroy();
      });
      s.on('error', reject);
    });
    expect(tcpAnswer.readUInt16BE(2)).toBe(0xabcd);
    expect(tcpAnswer[5]! & 0x0f).toBe(5);
    const reports = await reportsOf('exec-dns');
    expect(reports.every((r) => r.kind === 'dns' && r.code === 'EGRESS_DNS_REFUSED')).toBe(true);
    expect(reports.map((r) => r.host)).toEqual(expect.arrayContaining(['api.test', 'leak']));
    expect((await control.deleteGrant('exec-dns')).usage.dnsQueries).toBe(reports.length);
  });

  it('a connection to an address that holds no grant', async () => {
    const g = await register('exec-gone', grantWith());
    await control.deleteGrant('exec-gone');
    await expect(viaProxy(g.at, `http://api.test:${upstreamPort}/`)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    await expect(
      viaProxy({ address: `127.0.0.${nextAddress++}`, port: g.proxyPort }, `http://api.test:${upstreamPort}/`),
    ).rejects.toMatchObject({ code: 'ECONNREFUSED' });
  });
});

describe('the control API', () => {
  const base = () => `http://127.0.0.1:${proxy.control.port}`;

  it('answers health without a token, and nothing else', async () => {
    expect(await (await fetch(`${base()}/health`)).json()).toEqual({ ok: true });
    for (const auth of [undefined, 'Bearer wrong', `Basic ${TOKEN}`, `Bearer ${TOKEN}x`]) {
      const res = await fetch(`${base()}/grants`, { headers: auth ? { authorization: auth } : {} });
      expect(res.status, auth).toBe(401);
      expect(await res.json()).toMatchObject({ error: { code: 'UNAUTHORIZED' } });
    }
  });

  it('refuses bad grants, twice the same key or address, and unknown keys, with their codes', async () => {
    await expect(control.putGrant('bad', '127.0.0.250', { ...grantWith(), destinations: [] })).rejects.toMatchObject({
      code: 'EGRESS_GRANT_INVALID',
    });
    await expect(control.putGrant('bad', 'not-an-ip', grantWith())).rejects.toMatchObject({
      code: 'EGRESS_GRANT_INVALID',
    });
    await expect(control.putGrant('bad key', '127.0.0.250', grantWith())).rejects.toMatchObject({
      code: 'EGRESS_GRANT_INVALID',
    });
    await expect(control.putGrant('elsewhere', '192.0.2.1', grantWith())).rejects.toMatchObject({
      code: 'EGRESS_LISTEN_FAILED',
    });
    await control.putGrant('twice', '127.0.0.250', grantWith());
    await expect(control.putGrant('twice', '127.0.0.251', grantWith())).rejects.toMatchObject({
      code: 'EGRESS_GRANT_EXISTS',
    });
    await expect(control.putGrant('other', '127.0.0.250', grantWith())).rejects.toMatchObject({
      code: 'EGRESS_GRANT_EXISTS',
    });
    const keys = (await control.grants()).map((g) => g.key);
    expect(keys).toContain('twice');
    expect(keys).not.toContain('other');
    await control.deleteGrant('twice');
    await expect(control.deleteGrant('twice')).rejects.toMatchObject({ code: 'EGRESS_GRANT_UNKNOWN' });
  });

  it('long-polls for the next report', async () => {
    const g = await register('exec-poll', grantWith());
    const after = (await control.reports({ limit: 1000 })).next;
    const waiting = control.reports({ after, waitMs: 5000 });
    await viaProxy(g.at, `http://nowhere.test:${upstreamPort}/`);
    const page = await waiting;
    expect(page.reports[0]).toMatchObject({ executionKey: 'exec-poll', host: 'nowhere.test', decision: 'refused' });
    expect(page.next).toBe(page.reports.at(-1)!.seq);
    const empty = await control.reports({ after: page.next + 1000, waitMs: 100 });
    expect(empty.reports).toEqual([]);
    await control.deleteGrant('exec-poll');
  });
});
