// The wire of a remote `logs --follow` (supervisor/cluster/remote-follow.ts): what travels over PostgreSQL's LISTEN/NOTIFY
// between the node that takes the follow call and the node that owns the instance, outside the event log (a
// stream of output lines is ephemeral: recording it would grow the log with every line an app prints).
//
// Two kinds of messages:
// - control messages (follower → owner, on the owner's control channel): open, renew, cancel. Small, one NOTIFY
//   each, many followers on one channel, so no sequence.
// - frames (owner → one follower, on that follow's own channel): hello, lines, heartbeat, end, error. A frame may
//   be larger than a NOTIFY payload (PostgreSQL refuses 8000 bytes and more), so it is cut into packets, each with
//   the follow's next sequence number: NOTIFY drops nothing silently on a healthy connection, but a reconnect, an
//   owner that restarted, or a publish that failed in between would, and a follower must not show a stream with a
//   hole in it as if it were whole. A gap ends the follow (the caller follows again).
// Decoding never throws: a payload that is not ours is reported as `bad` and counted by the caller.
import type { LogLine } from './log-line.ts';

/** PostgreSQL refuses a NOTIFY payload of 8000 bytes or more; ours stay well below (the envelope included). */
export const MAX_PAYLOAD_BYTES = 7900;
/** A frame cut into more packets than this is not one we sent (the largest lines frame stays far below). */
const MAX_PARTS = 10_000;
/** Instance ids as the sandbox layout allows them (adapters/sandbox/layout.ts). */
const ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const FOLLOW_ID = /^[a-f0-9]{32}$/;
const NODE = /^[A-Za-z0-9_.-]{1,63}$/;

export type ControlMessage =
  | { t: 'open'; followId: string; instanceId: string; from: string }
  | { t: 'renew'; followId: string }
  | { t: 'cancel'; followId: string };

export type FollowFrame =
  | { t: 'hello'; by: string }
  | { t: 'lines'; lines: LogLine[] }
  | { t: 'hb' }
  | { t: 'end'; reason: 'exited' | 'cancelled' }
  | { t: 'error'; code: string; message: string };

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function encodeControl(m: ControlMessage): string {
  return JSON.stringify(m);
}

/** A control message, or null for anything else (another program's NOTIFY on the channel, a newer peer's). */
export function decodeControl(payload: string): ControlMessage | null {
  let v: unknown;
  try {
    v = JSON.parse(payload);
  } catch {
    return null;
  }
  if (!isObj(v) || typeof v.followId !== 'string' || !FOLLOW_ID.test(v.followId)) return null;
  if (v.t === 'renew' || v.t === 'cancel') return { t: v.t, followId: v.followId };
  if (
    v.t === 'open' &&
    typeof v.instanceId === 'string' &&
    ID.test(v.instanceId) &&
    typeof v.from === 'string' &&
    NODE.test(v.from)
  ) {
    return { t: 'open', followId: v.followId, instanceId: v.instanceId, from: v.from };
  }
  return null;
}

const isLine = (l: unknown): l is LogLine =>
  isObj(l) &&
  (l.stream === 'stdout' || l.stream === 'stderr') &&
  typeof l.line === 'string' &&
  typeof l.at === 'string';

function checkFrame(v: unknown): FollowFrame | null {
  if (!isObj(v)) return null;
  switch (v.t) {
    case 'hello':
      return typeof v.by === 'string' ? { t: 'hello', by: v.by } : null;
    case 'lines':
      return Array.isArray(v.lines) && v.lines.every(isLine)
        ? { t: 'lines', lines: v.lines.map((l: LogLine) => ({ stream: l.stream, line: l.line, at: l.at })) }
        : null;
    case 'hb':
      return { t: 'hb' };
    case 'end':
      return v.reason === 'exited' || v.reason === 'cancelled' ? { t: 'end', reason: v.reason } : null;
    case 'error':
      return typeof v.code === 'string' && typeof v.message === 'string'
        ? { t: 'error', code: v.code, message: v.message }
        : null;
    default:
      return null;
  }
}

/** One packet: `s` the follow's sequence number, part `i` of `n`, `d` that slice of the frame's JSON. */
const packet = (s: number, i: number, n: number, d: string): string => JSON.stringify({ s, i, n, d });

/**
 * Cuts a frame into NOTIFY payloads below `maxBytes`, numbered from `seq` on (the caller sends them in this order,
 * one after the other, and continues from `seq + payloads.length`).
 */
export function encodeFrame(frame: FollowFrame, seq: number, maxBytes = MAX_PAYLOAD_BYTES): string[] {
  const json = JSON.stringify(frame);
  // Slices by characters, then checked in bytes (escaping and UTF-8 make a character up to 6 bytes): a slice too
  // large is halved until it fits. The part count is only known at the end, so the envelope is sized for the
  // largest one (5 digits each) and written afterwards.
  const room = maxBytes - packet(Number.MAX_SAFE_INTEGER, MAX_PARTS, MAX_PARTS, '').length;
  if (room < 16) throw new RangeError(`maxBytes ${maxBytes} leaves no room for data`);
  const slices: string[] = [];
  let at = 0;
  while (at < json.length || slices.length === 0) {
    let len = Math.min(room, json.length - at);
    for (;;) {
      let end = at + len;
      // Never between the two halves of a surrogate pair (each half alone is not valid UTF-8).
      const c = json.charCodeAt(end - 1);
      if (end < json.length && c >= 0xd800 && c <= 0xdbff) end -= 1;
      const d = json.slice(at, end);
      if (Buffer.byteLength(JSON.stringify(d)) <= room || len <= 1) {
        slices.push(d);
        at = end;
        break;
      }
      len = Math.max(1, Math.floor(len / 2));
    }
  }
  return slices.map((d, i) => packet(seq + i, i, slices.length, d));
}

export type ReadResult =
  | { kind: 'frame'; frame: FollowFrame }
  /** A part of a frame: more packets to come. */
  | { kind: 'partial' }
  /** A packet is missing (or came out of order): the stream has a hole. */
  | { kind: 'gap'; expected: number; got: number }
  /** Not a packet of ours (or a frame that does not check): ignored. */
  | { kind: 'bad' };

/** Reassembles one follow's frames from its packets, in sequence; says when one is missing. */
export class FrameReader {
  private expected = 0;
  private parts: string[] = [];
  bad = 0;

  push(payload: string): ReadResult {
    let v: unknown;
    try {
      v = JSON.parse(payload);
    } catch {
      this.bad += 1;
      return { kind: 'bad' };
    }
    if (
      !isObj(v) ||
      !Number.isSafeInteger(v.s) ||
      !Number.isSafeInteger(v.i) ||
      !Number.isSafeInteger(v.n) ||
      typeof v.d !== 'string'
    ) {
      this.bad += 1;
      return { kind: 'bad' };
    }
    const s = v.s as number;
    const i = v.i as number;
    const n = v.n as number;
    if (n < 1 || n > MAX_PARTS || i < 0 || i >= n) {
      this.bad += 1;
      return { kind: 'bad' };
    }
    if (s !== this.expected || i !== this.parts.length) return { kind: 'gap', expected: this.expected, got: s };
    this.expected += 1;
    this.parts.push(v.d);
    if (this.parts.length < n) return { kind: 'partial' };
    const json = this.parts.join('');
    this.parts = [];
    let frame: FollowFrame | null = null;
    try {
      frame = checkFrame(JSON.parse(json));
    } catch {
      frame = null;
    }
    if (!frame) {
      this.bad += 1;
      return { kind: 'bad' };
    }
    return { kind: 'frame', frame };
  }
}

export function isFollowId(s: string): boolean {
  return FOLLOW_ID.test(s);
}
