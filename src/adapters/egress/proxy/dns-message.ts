// DNS messages, as much of RFC 1035 as refusing a query needs: read its header and first question, and write the
// REFUSED answer that echoes them. The proxy never answers a sandbox's query with anything else.
//
// Parsing is bounded and defensive (a hostile sandbox writes these bytes): a name is at most 255 bytes of at most
// 63-byte labels, a compression pointer in a query is refused as malformed, and nothing past the first question is
// read.

export interface DnsQuery {
  id: number;
  opcode: number;
  /** Recursion desired, echoed in the answer. */
  rd: boolean;
  /** The first question's name, lower case, without the trailing dot ('' for the root, or when unreadable). */
  name: string;
  /** Its type (1 = A, 28 = AAAA…), 0 when there is no readable question. */
  type: number;
  /** Where the first question ends in the message: its bytes are echoed (12 when there is none). */
  questionEnd: number;
}

const HEADER = 12;
const MAX_NAME = 255;
export const RCODE_REFUSED = 5;

const TYPES: Record<number, string> = {
  1: 'A',
  2: 'NS',
  5: 'CNAME',
  6: 'SOA',
  12: 'PTR',
  15: 'MX',
  16: 'TXT',
  28: 'AAAA',
  33: 'SRV',
  64: 'SVCB',
  65: 'HTTPS',
  255: 'ANY',
};

export const typeName = (type: number): string => TYPES[type] ?? `TYPE${type}`;

/** The name starting at `offset` and where it ends, or null when it is malformed, compressed or too long. */
function readName(msg: Uint8Array, offset: number): { name: string; end: number } | null {
  const labels: string[] = [];
  let at = offset;
  let total = 0;
  for (;;) {
    const len = msg[at];
    if (len === undefined || len > 63) return null;
    at++;
    if (len === 0) break;
    total += len + 1;
    if (total > MAX_NAME || at + len > msg.length) return null;
    // Bytes outside printable ASCII become '?': the name goes into reports and histories as text.
    const bytes = [...msg.subarray(at, at + len)].map((c) => (c > 0x20 && c < 0x7f ? c : 0x3f));
    labels.push(String.fromCharCode(...bytes).toLowerCase());
    at += len;
  }
  return { name: labels.join('.'), end: at };
}

/** A query's header and first question; null when it is not a query (too short, or a response). */
export function parseQuery(msg: Uint8Array): DnsQuery | null {
  if (msg.length < HEADER) return null;
  const view = new DataView(msg.buffer, msg.byteOffset, msg.byteLength);
  const flags = view.getUint16(2);
  if (flags & 0x8000) return null;
  const query: DnsQuery = {
    id: view.getUint16(0),
    opcode: (flags >> 11) & 0xf,
    rd: (flags & 0x0100) !== 0,
    name: '',
    type: 0,
    questionEnd: HEADER,
  };
  if (view.getUint16(4) === 0) return query;
  const name = readName(msg, HEADER);
  if (!name || name.end + 4 > msg.length) return query;
  return { ...query, name: name.name, type: view.getUint16(name.end), questionEnd: name.end + 4 };
}

/** The REFUSED answer to `query`: its id, opcode and RD, and its first question when it had a readable one. */
export function refusedAnswer(query: DnsQuery, msg: Uint8Array): Uint8Array {
  const question = msg.subarray(HEADER, query.questionEnd);
  const out = new Uint8Array(HEADER + question.length);
  const view = new DataView(out.buffer);
  view.setUint16(0, query.id);
  view.setUint16(2, 0x8000 | (query.opcode << 11) | (query.rd ? 0x0100 : 0) | RCODE_REFUSED);
  view.setUint16(4, question.length > 0 ? 1 : 0);
  out.set(question, HEADER);
  return out;
}
