// A DNS server for tests, UDP on loopback: it answers A and AAAA queries from a function of the name and how many
// times that name was asked for, so a test can make a name answer differently the second time (rebinding). It
// records every question, so a test can also prove a name was never looked up.
import { createSocket } from 'node:dgram';
import { parseIp } from '../../src/domain/at-run/egress-address.ts';
import { parseQuery } from '../../src/adapters/egress/proxy/dns-message.ts';

/** The addresses to answer for `name` (lower case) on its `nth` A query (1, 2, …); [] answers with no records. */
export type Answers = (name: string, nth: number) => string[];

export interface DnsTestServer {
  address: string;
  port: number;
  /** Every question asked, in order: `A api.test`, `AAAA api.test`. */
  asked: string[];
  close(): Promise<void>;
}

function rdata(address: string): Uint8Array | null {
  const ip = parseIp(address);
  if (!ip) return null;
  const bytes = new Uint8Array(ip.family === 4 ? 4 : 16);
  for (let i = 0; i < bytes.length; i++) bytes[i] = Number((ip.value >> BigInt(8 * (bytes.length - 1 - i))) & 0xffn);
  return bytes;
}

/** The answer to a query: NOERROR with the records of `type` among `addresses`. */
function answer(msg: Buffer, id: number, questionEnd: number, type: number, addresses: string[]): Buffer {
  const records = addresses
    .map(rdata)
    .filter((r): r is Uint8Array => r !== null && (type === 1 ? r.length === 4 : r.length === 16));
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  header.writeUInt16BE(0x8180, 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(records.length, 6);
  const parts: Buffer[] = [header, msg.subarray(12, questionEnd)];
  for (const r of records) {
    const rr = Buffer.alloc(12);
    rr.writeUInt16BE(0xc00c, 0);
    rr.writeUInt16BE(type, 2);
    rr.writeUInt16BE(1, 4);
    rr.writeUInt32BE(0, 6);
    rr.writeUInt16BE(r.length, 10);
    parts.push(rr, Buffer.from(r));
  }
  return Buffer.concat(parts);
}

export async function startDnsTestServer(answers: Answers, address = '127.0.0.1'): Promise<DnsTestServer> {
  const socket = createSocket('udp4');
  const asked: string[] = [];
  const counts = new Map<string, number>();
  socket.on('message', (msg, remote) => {
    const q = parseQuery(msg);
    if (!q || (q.type !== 1 && q.type !== 28)) return;
    asked.push(`${q.type === 1 ? 'A' : 'AAAA'} ${q.name}`);
    // The nth question for a name counts A queries: a resolver asks A and AAAA together, once per lookup.
    const nth = q.type === 1 ? (counts.get(q.name) ?? 0) + 1 : Math.max(counts.get(q.name) ?? 1, 1);
    if (q.type === 1) counts.set(q.name, nth);
    socket.send(answer(msg, q.id, q.questionEnd, q.type, answers(q.name, nth)), remote.port, remote.address);
  });
  await new Promise<void>((resolve) => socket.bind({ address, port: 0 }, resolve));
  return {
    address,
    port: socket.address().port,
    asked,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
}
