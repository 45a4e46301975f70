// The listeners of one grant: the HTTP proxy port and the DNS port, bound to the grant's own address only.
//
// Each execution's internal network gives the proxy one address on it, so the address a connection arrives on
// says which execution made it; binding that address alone (never a wildcard) makes it exact, UDP included, where
// a wildcard socket could not tell which address a datagram was sent to. The HTTP server is set up for hostile
// clients: small headers, short header and keep-alive timeouts, a bounded number of sockets, and every socket
// destroyed when the grant goes.
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { typeName } from './dns-message.ts';
import { startDnsRefuser, type DnsRefuser } from './dns-refuser.ts';
import { handleRequest } from './forward.ts';
import type { FlowContext } from './flow-admission.ts';
import { handleConnect, writeRefusal } from './tunnel.ts';

export interface GrantListener {
  proxyPort: number;
  dnsPort: number;
  close(): Promise<void>;
}

const MAX_HEADER_BYTES = 16 * 1024;
const HEADERS_TIMEOUT_MS = 10_000;
/** Sockets beyond the grant's connection limit, for idle keep-alive clients and requests waiting for a slot. */
const SPARE_SOCKETS = 16;

function proxyServer(ctx: FlowContext, sockets: Set<Socket>): Server {
  const { state } = ctx;
  const server = createServer({
    maxHeaderSize: MAX_HEADER_BYTES,
    headersTimeout: HEADERS_TIMEOUT_MS,
    // Node wants the request timeout at least the headers' one; the grant's time limit ends a request anyway.
    requestTimeout: Math.max(state.grant.limits.seconds * 1000, HEADERS_TIMEOUT_MS),
    keepAliveTimeout: 5_000,
  });
  server.maxConnections = state.grant.limits.connections + SPARE_SOCKETS;
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  server.on('drop', (data?: { remoteAddress?: string }) =>
    state.refuseAttempt(
      'request',
      '',
      0,
      'EGRESS_CONNECTIONS_EXCEEDED',
      `too many sockets open to the proxy (from ${data?.remoteAddress ?? 'unknown'})`,
    ),
  );
  server.on('request', (req, res) => handleRequest(ctx, req, res));
  server.on('connect', (req, socket, head) => handleConnect(ctx, req, socket, head));
  server.on('upgrade', (req, socket) => {
    const reason = `protocol upgrades are not proxied (${String(req.headers.upgrade).slice(0, 64)})`;
    state.refuseAttempt('http', '', 0, 'EGRESS_REQUEST_INVALID', reason);
    writeRefusal(socket, { code: 'EGRESS_REQUEST_INVALID', reason });
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    // A socket that sent nothing and timed out, or went away, is not an attempt worth a report.
    if (err.code !== 'ECONNRESET' && err.code !== 'ERR_HTTP_REQUEST_TIMEOUT')
      state.refuseAttempt('request', '', 0, 'EGRESS_REQUEST_INVALID', `not an HTTP request (${err.code ?? 'error'})`);
    writeRefusal(socket, { code: 'EGRESS_REQUEST_INVALID', reason: 'not an HTTP proxy request' });
    socket.destroy();
  });
  return server;
}

function listen(server: Server, host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port, exclusive: true }, () => {
      server.off('error', reject);
      const bound = server.address();
      resolve(typeof bound === 'object' && bound ? bound.port : port);
    });
  });
}

/** Binds the grant's HTTP proxy and DNS ports on its address (port 0: any free one). Rejects when either fails. */
export async function startGrantListener(
  ctx: FlowContext,
  ports: { proxy: number; dns: number },
): Promise<GrantListener> {
  const { state } = ctx;
  const sockets = new Set<Socket>();
  const server = proxyServer(ctx, sockets);
  const proxyPort = await listen(server, state.address, ports.proxy);
  let dns: DnsRefuser;
  let dnsPort = ports.dns;
  try {
    dns = await startDnsRefuser(state.address, ports.dns, (query, transport) => {
      const what = query ? `${typeName(query.type)} ${query.name || '.'}` : 'an unreadable message';
      state.refuseAttempt(
        'dns',
        query?.name ?? '',
        dnsPort,
        'EGRESS_DNS_REFUSED',
        `DNS over ${transport} for ${what}: the sandbox resolves nothing, the proxy resolves granted names`,
      );
    });
  } catch (err) {
    server.close();
    throw err;
  }
  dnsPort = dns.port;
  return {
    proxyPort,
    dnsPort: dns.port,
    async close() {
      for (const s of sockets) s.destroy();
      await Promise.all([new Promise<void>((resolve) => server.close(() => resolve())), dns.close()]);
    },
  };
}
