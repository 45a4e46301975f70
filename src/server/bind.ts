// Putting an HTTP server on an address and taking it off again, the same way for every listener runlog opens (the
// API and the inspector, the metrics listener).
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface BoundAddress {
  host: string;
  port: number;
  /** `http://<host>:<port>`, an IPv6 address in brackets. */
  origin: string;
}

/** Listens on host:port (port 0: a free one), exclusively (no other process shares it); rejects on EADDRINUSE etc. */
export async function listenOn(server: Server, host: string, port: number): Promise<BoundAddress> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host, port, exclusive: true }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = server.address() as AddressInfo;
  const hostPart = bound.family === 'IPv6' ? `[${bound.address}]` : bound.address;
  return { host: bound.address, port: bound.port, origin: `http://${hostPart}:${bound.port}` };
}

/**
 * Stops accepting and resolves once the server is closed: idle connections end at once, requests still in flight
 * are cut after `graceMs` (0: at once).
 */
export function closeServer(server: Server, graceMs = 0): Promise<void> {
  return new Promise<void>((resolve) => {
    server.close(() => resolve());
    if (graceMs <= 0) {
      server.closeAllConnections();
      return;
    }
    server.closeIdleConnections();
    setTimeout(() => server.closeAllConnections(), graceMs).unref();
  });
}
