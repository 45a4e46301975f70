// The log's hash chain: every event carries sha256(previous event's hash ‖ its canonical bytes), so a changed,
// removed or reordered event breaks every hash after it and `runlog verify` can name the first bad position.
// The canonical bytes are the stored columns exactly as SQLite holds them (data and meta as their JSON text),
// never a re-encoding, so the chain checks what is on disk. `chain_head` (migration 4) holds the last link:
// events deleted from the end of the log (which leave a valid, shorter chain) are caught against it.
import { createHash } from 'node:crypto';

/** The hash before the first event. */
export const GENESIS = Buffer.alloc(32);

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
  return createHash('sha256')
    .update(prev)
    .update(`${JSON.stringify([seq, stream, version, type, schema, at, data.length])}\n${data}\n${meta}`)
    .digest();
}

/** What an event's link covers besides its data, meta and hash (the event's place and kind); each reader of the chain adds those three in its own form. */
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
