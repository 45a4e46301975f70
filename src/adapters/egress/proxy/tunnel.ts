// HTTP CONNECT: a tunnel to a granted name's checked address, every byte counted against the grant both ways.
//
// The tunnel opens to the address the decision chose and to nothing else: the name is never resolved again. Bytes
// are forwarded chunk by chunk, each charged before it is written, so the budget is never overspent; backpressure
// pauses the side that writes faster. When the upstream closes, the client's side is ended (its queued bytes still
// flushed); when the client goes, the upstream is destroyed.
import type { IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { admitFlow, refusalBody, refusalStatus, type FlowContext } from './flow-admission.ts';
import type { Flow, Gate } from './grant-state.ts';

const REASONS: Record<number, string> = { 400: 'Bad Request', 429: 'Too Many Requests', 502: 'Bad Gateway' };

/** `host:port` or `[v6]:port`, or null. */
export function parseAuthority(text: string): { host: string; port: number } | null {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]/@]+)):([1-9][0-9]{0,4})$/.exec(text);
  if (!m) return null;
  const port = Number(m[3]);
  if (port > 65535) return null;
  return { host: m[1] !== undefined ? `[${m[1]}]` : (m[2] as string), port };
}

/** Writes a refusal as a raw HTTP response on a socket the HTTP server has let go of, and ends it. */
export function writeRefusal(socket: Duplex, refused: Gate): void {
  if (socket.destroyed || socket.writableEnded) return;
  const body = refusalBody(refused);
  const status = refusalStatus(refused.code);
  socket.end(
    `HTTP/1.1 ${status} ${REASONS[status] ?? 'Forbidden'}\r\nx-egress-refused: ${refused.code}\r\n` +
      `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

/** Copies `from` into `to`, each chunk charged first; a refused charge stops the copy (the grant cuts the flow). */
function pump(from: Duplex, to: Duplex, charge: (n: number) => boolean): void {
  from.on('data', (chunk: Buffer) => {
    if (!charge(chunk.length)) return;
    if (!to.write(chunk)) {
      from.pause();
      to.once('drain', () => from.resume());
    }
  });
}

function splice(ctx: FlowContext, flow: Flow, client: Duplex, upstream: Socket, head: Buffer): void {
  const { state } = ctx;
  client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
  if (head.length > 0 && state.charge(flow, 'up', head.length)) upstream.write(head);
  pump(client, upstream, (n) => state.charge(flow, 'up', n));
  pump(upstream, client, (n) => state.charge(flow, 'down', n));
  client.on('end', () => upstream.end());
  upstream.on('end', () => client.end());
  upstream.on('close', () => {
    client.end();
    state.end(flow);
  });
}

interface Upstream {
  host: string;
  port: number;
  address: string;
  family: 4 | 6;
}

/** Opens the upstream connection of an admitted tunnel and splices it to the client, or answers 502. */
function open(ctx: FlowContext, flow: Flow, client: Duplex, to: Upstream, head: Buffer): Socket {
  const { state } = ctx;
  const socket = connect({ host: to.address, port: to.port, family: to.family });
  let connected = false;
  const timer = setTimeout(() => socket.destroy(new Error('connect timed out')), ctx.connectTimeoutMs);
  socket.once('close', () => clearTimeout(timer));
  // After the connection opened, an error is followed by 'close', which ends the flow (splice).
  socket.on('error', (err) => {
    if (connected || flow.phase !== 'allowed') return;
    state.end(flow, 'EGRESS_UPSTREAM_FAILED', `${to.address}:${to.port}: ${err.message}`);
    writeRefusal(client, {
      code: 'EGRESS_UPSTREAM_FAILED',
      reason: `${to.host}:${to.port} did not accept the connection`,
    });
  });
  socket.once('connect', () => {
    connected = true;
    clearTimeout(timer);
    splice(ctx, flow, client, socket, head);
  });
  return socket;
}

/** Handles one CONNECT request (the HTTP server's 'connect' event). */
export function handleConnect(ctx: FlowContext, req: IncomingMessage, client: Duplex, head: Buffer): void {
  const { state } = ctx;
  client.on('error', () => {});
  const target = parseAuthority(req.url ?? '');
  if (!target) {
    const refused: Gate = {
      code: 'EGRESS_REQUEST_INVALID',
      reason: `CONNECT needs host:port, got ${JSON.stringify(String(req.url).slice(0, 300))}`,
    };
    state.refuseAttempt('connect', '', 0, refused.code, refused.reason);
    writeRefusal(client, refused);
    return;
  }
  let upstream: Socket | null = null;
  const destroy = () => {
    upstream?.destroy();
    client.destroy();
  };
  void admitFlow(ctx, 'connect', target, destroy).then((admitted) => {
    if ('refused' in admitted) return writeRefusal(client, admitted.refused);
    const { flow } = admitted;
    if (client.destroyed) return state.end(flow);
    client.on('close', () => {
      upstream?.destroy();
      state.end(flow);
    });
    upstream = open(ctx, flow, client, { ...target, address: admitted.address, family: admitted.family }, head);
  });
}
