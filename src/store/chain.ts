// The log's hash chain: every event carries sha256(previous event's hash ‖ its canonical bytes), so a changed,
// removed or reordered event breaks every hash after it and `runlog verify` can name the first bad position.
// The canonical bytes are the stored columns exactly as SQLite holds them (data and meta as their JSON text),
// never a re-encoding, so the chain checks what is on disk. `chain_head` (migration 4) holds the last link:
// events deleted from the end of the log (which leave a valid, shorter chain) are caught against it.
import { createHash, hash } from 'node:crypto';

/** The hash before the first event. */
export const GENESIS = Buffer.alloc(32);

/** The largest input hashed through the reused buffer below; a larger event is hashed in a Hash object of its own. */
const SCRATCH_MAX = 64 * 1024;

/**
 * Where one link's input (the previous hash, then the event's text as UTF-8) is laid out before it is hashed.
 * Reused across calls: every append and every check of the chain hashes each event, and a one-shot digest of bytes
 * already in place costs a fraction of a Hash object's (created, fed twice, digested, then collected).
 */
let scratch = Buffer.allocUnsafe(4096);

/** A string's JSON text, remembered for the next call: consecutive events mostly share their stream, type and time. */
class Quoted {
  private last: string | undefined;
  private json = '';
  private utf8 = Buffer.alloc(0);

  of(s: string): string {
    if (s !== this.last) {
      this.json = JSON.stringify(s);
      this.utf8 = Buffer.from(this.json, 'utf8');
      this.last = s;
    }
    return this.json;
  }

  /** The same text's UTF-8 bytes. */
  bytes(s: string): Buffer {
    if (s !== this.last) this.of(s);
    return this.utf8;
  }
}

const quoted = { stream: new Quoted(), type: new Quoted(), at: new Quoted() };
const finite = (n: unknown): n is number => typeof n === 'number' && Number.isFinite(n);
/** A number whose JSON text is its decimal digits alone (what every well-formed row's seq, version and schema are). */
const counting = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0;

/**
 * The link's header: exactly JSON.stringify([seq, stream, version, type, schema, at, length]), written without the
 * array and with its strings' JSON remembered (a finite number's JSON text is its string). Any other value (a column
 * a damaged log holds in another type) takes JSON.stringify itself.
 */
function header(
  seq: number,
  stream: string,
  version: number,
  type: string,
  schema: number,
  at: string,
  length: number,
): string {
  if (
    finite(seq) &&
    finite(version) &&
    finite(schema) &&
    finite(length) &&
    typeof stream === 'string' &&
    typeof type === 'string' &&
    typeof at === 'string'
  )
    return `[${seq},${quoted.stream.of(stream)},${version},${quoted.type.of(type)},${schema},${quoted.at.of(at)},${length}]`;
  return JSON.stringify([seq, stream, version, type, schema, at, length]);
}

/** Writes a non-negative safe integer's decimal digits at `at`; returns where they end. */
function putDigits(buf: Buffer, at: number, n: number): number {
  let end = at + 1;
  for (let m = n; m >= 10; m = (m - (m % 10)) / 10) end += 1;
  for (let i = end - 1, m = n; i >= at; i -= 1) {
    const digit = m % 10;
    buf[i] = 0x30 + digit;
    m = (m - digit) / 10;
  }
  return end;
}

/** Writes bytes at `at`; returns where they end. */
function putBytes(buf: Buffer, at: number, bytes: Buffer): number {
  buf.set(bytes, at);
  return at + bytes.length;
}

const COMMA = 0x2c;
const NEWLINE = 0x0a;

/**
 * One link's input laid out in the scratch buffer without building its text first: the header's numbers written
 * as their digits and its strings copied as remembered bytes, then data and meta encoded in place. The bytes are the
 * ones the text would encode to; only a well-formed row (counting numbers, strings) is written this way. Returns
 * where the input ends, or -1 when it is not one of those or may not fit.
 */
function layOut(
  prev: Uint8Array,
  seq: number,
  stream: string,
  version: number,
  type: string,
  schema: number,
  at: string,
  data: string,
  meta: string,
): number {
  if (
    !counting(seq) ||
    !counting(version) ||
    !counting(schema) ||
    typeof stream !== 'string' ||
    typeof type !== 'string' ||
    typeof at !== 'string' ||
    typeof data !== 'string' ||
    typeof meta !== 'string'
  )
    return -1;
  const s = quoted.stream.bytes(stream);
  const t = quoted.type.bytes(type);
  const a = quoted.at.bytes(at);
  // Four numbers of at most 16 digits, ten brackets, commas and newlines; UTF-8 takes at most 3 bytes per unit.
  const most = prev.length + s.length + t.length + a.length + 4 * 16 + 10 + 3 * (data.length + meta.length);
  if (most > SCRATCH_MAX) return -1;
  if (most > scratch.length) scratch = Buffer.allocUnsafe(SCRATCH_MAX);
  const buf = scratch;
  buf.set(prev, 0);
  let i = prev.length;
  buf[i++] = 0x5b; // [
  i = putDigits(buf, i, seq);
  buf[i++] = COMMA;
  i = putBytes(buf, i, s);
  buf[i++] = COMMA;
  i = putDigits(buf, i, version);
  buf[i++] = COMMA;
  i = putBytes(buf, i, t);
  buf[i++] = COMMA;
  i = putDigits(buf, i, schema);
  buf[i++] = COMMA;
  i = putBytes(buf, i, a);
  buf[i++] = COMMA;
  i = putDigits(buf, i, data.length);
  buf[i++] = 0x5d; // ]
  buf[i++] = NEWLINE;
  i += buf.write(data, i, 'utf8');
  buf[i++] = NEWLINE;
  i += buf.write(meta, i, 'utf8');
  return i;
}

/** One event's link: its hash given the previous one. */
export function eventHash(
  prev: Uint8Array,
  seq: number,
  stream: string,
  version: number,
  type: string,
  schema: number,
  at: string,
  data: string,
  meta: string,
): Buffer {
  // A JSON header (with data's length) then the two JSON texts: no two different events give the same bytes.
  const end = layOut(prev, seq, stream, version, type, schema, at, data, meta);
  if (end >= 0)
    // The digest as a 'binary' (latin1: one char per byte) string, then its bytes: cheaper than asking for a Buffer.
    return Buffer.from(hash('sha256', scratch.subarray(0, end), 'binary'), 'binary');
  const text = `${header(seq, stream, version, type, schema, at, data.length)}\n${data}\n${meta}`;
  // UTF-8 takes at most 3 bytes per UTF-16 unit, so the whole input fits in `most` bytes.
  const most = prev.length + 3 * text.length;
  if (most > SCRATCH_MAX) return createHash('sha256').update(prev).update(text).digest();
  if (most > scratch.length) scratch = Buffer.allocUnsafe(SCRATCH_MAX);
  scratch.set(prev, 0);
  const written = prev.length + scratch.write(text, prev.length, 'utf8');
  return Buffer.from(hash('sha256', scratch.subarray(0, written), 'binary'), 'binary');
}

/**
 * What an event's link covers besides its data, meta and hash (the event's place and kind); each reader of the chain
 * adds those three in its own form.
 */
export interface ChainedEventFields {
  seq: number;
  stream: string;
  version: number;
  type: string;
  schema: number;
  at: string;
}

/** A row as the chain reads it, in `.raw()` order. */
export type ChainRow = [
  seq: number,
  stream: string,
  version: number,
  type: string,
  schema: number,
  at: string,
  data: string,
  meta: string,
  hash: Buffer | null,
];

export const CHAIN_COLUMNS = 'seq, stream, version, type, schema, at, data, meta, hash';

export function rowHash(prev: Uint8Array, r: ChainRow): Buffer {
  return eventHash(prev, r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
}

/** What a check of (part of) the chain found. */
export type ChainCheck =
  | { ok: true; events: number; lastSeq: number; lastHash: Buffer }
  | { ok: false; events: number; seq: number; stream: string | null; version: number | null; reason: string };
