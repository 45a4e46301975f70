// The DNS listener of one grant's address, UDP and TCP: every query is answered REFUSED and reported.
//
// A sandbox's resolver points here, so a handler that looks a name up learns at once that it must go through the
// HTTP proxy (which resolves granted names itself), and the attempt is in its history. Nothing is ever resolved or
// forwarded, so DNS cannot carry data out. TCP connections are bounded: a few messages each, closed when idle.
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createServer, type Server, type Socket } from 'node:net';
import { parseQuery, refusedAnswer, type DnsQuery } from './dns-message.ts';

export interface DnsRefuser {
  port: number;
  close(): Promise<void>;
}

/** Called for every message: the query, or null when it could not be read (then nothing is answered). */
export type OnDnsQuery = (query: DnsQuery | null, transport: 'udp' | 'tcp') => void;

const TCP_IDLE_MS = 5_000;
const TCP_MAX_MESSAGES = 16;
const MAX_MESSAGE = 4096;

function listenUdp(address: string, port: number, onQuery: OnDnsQuery): Promise<UdpSocket> {
  const socket = createSocket({ type: address.includes(':') ? 'udp6' : 'udp4' });
  socket.on('message', (msg, remote) => {
    const query = msg.length <= MAX_MESSAGE ? parseQuery(msg) : null;
    onQuery(query, 'udp');
    if (query) socket.send(refusedAnswer(query, msg), remote.port, remote.address);
  });
  socket.on('error', () => {});
  return new Promise((resolve, reject) => {
    socket.once('error', reject);
    socket.bind({ address, port, exclusive: true }, () => {
      socket.off('error', reject);
      resolve(socket);
    });
  });
}

/** A TCP DNS connection: 2-byte length-prefixed messages, each answered; closed when idle or after a few. */
function serveTcp(conn: Socket, onQuery: OnDnsQuery): void {
  let buffered = Buffer.alloc(0);
  let answered = 0;
  conn.setTimeout(TCP_IDLE_MS, () => conn.destroy());
  conn.on('error', () => {});
  conn.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    while (buffered.length >= 2) {
      const len = buffered.readUInt16BE(0);
      if (len > MAX_MESSAGE) {
        onQuery(null, 'tcp');
        conn.destroy();
        return;
      }
      if (buffered.length < 2 + len) return;
      const msg = buffered.subarray(2, 2 + len);
      buffered = buffered.subarray(2 + len);
      const query = parseQuery(msg);
      onQuery(query, 'tcp');
      if (!query || ++answered >= TCP_MAX_MESSAGES) {
        if (query) conn.end(frame(refusedAnswer(query, msg)));
        else conn.destroy();
        return;
      }
      conn.write(frame(refusedAnswer(query, msg)));
    }
  });
}

const frame = (answer: Uint8Array): Buffer => {
  const out = Buffer.alloc(2 + answer.length);
  out.writeUInt16BE(answer.length, 0);
  out.set(answer, 2);
  return out;
};

function listenTcp(address: string, port: number, onQuery: OnDnsQuery): Promise<Server> {
  const server = createServer((conn) => serveTcp(conn, onQuery));
  server.maxConnections = 16;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: address, port, exclusive: true }, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

/**
 * Listens on `address`:`port` for DNS over UDP and TCP. Port 0 takes a free UDP port and the same for TCP, trying
 * again a few times should another socket hold that TCP port. Rejects when either cannot bind.
 */
export async function startDnsRefuser(address: string, port: number, onQuery: OnDnsQuery): Promise<DnsRefuser> {
  for (let attempt = 1; ; attempt++) {
    const udp = await listenUdp(address, port, onQuery);
    const bound = udp.address().port;
    let tcp: Server;
    try {
      tcp = await listenTcp(address, bound, onQuery);
    } catch (err) {
      udp.close();
      if (port === 0 && attempt < 5 && (err as NodeJS.ErrnoException).code === 'EADDRINUSE') continue;
      throw err;
    }
    const conns = new Set<Socket>();
    tcp.on('connection', (c: Socket) => {
      conns.add(c);
      c.on('close', () => conns.delete(c));
    });
    return {
      port: bound,
      close: () =>
        new Promise<void>((resolve) => {
          udp.close();
          for (const c of conns) c.destroy();
          tcp.close(() => resolve());
        }),
    };
  }
}
