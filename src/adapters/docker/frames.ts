// Reading a worker's output: Docker's multiplexed attach/log stream split into stdout and stderr, stdout parsed
// as worker protocol v1 NDJSON frames under hard bounds. Pure (no IO): fed chunks, it reports what it saw.
//
// Bounds and what breaking them means:
//   maxStdoutBytes  total protocol bytes            → 'output-limit' (the caller kills the container)
//   maxFrameBytes   one frame (line)                → 'frame-too-large' when that line ends (or the stream
//                                                     ends); its bytes are counted but never buffered
//   maxFrameDepth   nesting of one frame            → 'frame-too-deep' (checked on the text, before parsing:
//                                                     a frame the supervisor could not re-encode is never taken)
//   any line that is not a frame of this invocation → 'malformed-frame'
//   maxStderrBytes  stderr kept (the last bytes)    → older stderr is dropped, never an error

export interface ProtocolError {
  code: string;
  message: string;
}

export type Frame =
  | { type: 'result'; id: string; output: unknown }
  | { type: 'error'; id: string; error: ProtocolError }
  | { type: 'log'; id: string; level?: string; message: string }
  | { type: 'progress'; id: string; progress: unknown; message?: string };

export type OutputViolation = 'output-limit' | 'frame-too-large' | 'frame-too-deep' | 'malformed-frame';

export interface OutputLimits {
  maxFrameBytes: number;
  /** Deepest nesting of arrays/objects in one frame. */
  maxFrameDepth: number;
  maxStdoutBytes: number;
  maxStderrBytes: number;
  /** How many log/progress frames to keep for the result (all are still passed to onFrame). */
  maxKeptFrames: number;
}

export const DEFAULT_OUTPUT_LIMITS: OutputLimits = {
  maxFrameBytes: 1024 * 1024,
  maxFrameDepth: 128,
  maxStdoutBytes: 16 * 1024 * 1024,
  maxStderrBytes: 64 * 1024,
  maxKeptFrames: 1000,
};

/** Splits Docker's multiplexed stream (8-byte header: stream, 0, 0, 0, uint32 BE length) without buffering payloads. */
export class StreamDemuxer {
  #header = Buffer.alloc(8);
  #headerFill = 0;
  #remaining = 0;
  #stream = 0;
  constructor(
    private readonly onStdout: (b: Buffer) => void,
    private readonly onStderr: (b: Buffer) => void,
  ) {}

  push(chunk: Buffer): void {
    let off = 0;
    while (off < chunk.length) {
      if (this.#remaining === 0) {
        const take = Math.min(8 - this.#headerFill, chunk.length - off);
        chunk.copy(this.#header, this.#headerFill, off, off + take);
        this.#headerFill += take;
        off += take;
        if (this.#headerFill < 8) return;
        this.#headerFill = 0;
        this.#stream = this.#header.readUInt8(0);
        this.#remaining = this.#header.readUInt32BE(4);
        continue;
      }
      const take = Math.min(this.#remaining, chunk.length - off);
      const part = chunk.subarray(off, off + take);
      off += take;
      this.#remaining -= take;
      if (this.#stream === 2) this.onStderr(part);
      else if (this.#stream === 1) this.onStdout(part);
      // stream 0 (stdin echo) never carries data for non-tty containers; dropped if it does
    }
  }
}

const FRAME_TYPES = new Set(['result', 'error', 'log', 'progress']);

/** The nesting depth of JSON text (brackets outside strings), stopping as soon as it passes `max`. */
export function jsonDepthExceeds(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/** Checks one parsed line against protocol v1 for invocation `id`; returns the frame or why it is malformed. */
export function checkFrame(value: unknown, id: string | null): Frame | string {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'a frame must be a JSON object';
  const f = value as Record<string, unknown>;
  if (typeof f.type !== 'string' || !FRAME_TYPES.has(f.type)) return `unknown frame type ${JSON.stringify(f.type)}`;
  if (typeof f.id !== 'string') return `${f.type} frame without a string id`;
  if (id !== null && f.id !== id)
    return `${f.type} frame for invocation ${JSON.stringify(f.id)}, expected ${JSON.stringify(id)}`;
  switch (f.type) {
    case 'result':
      if (!('output' in f)) return 'result frame without output';
      return { type: 'result', id: f.id, output: f.output };
    case 'error': {
      const e = f.error as Record<string, unknown> | null | undefined;
      if (!e || typeof e !== 'object' || typeof e.code !== 'string' || typeof e.message !== 'string')
        return 'error frame without error {code, message}';
      return { type: 'error', id: f.id, error: { code: e.code, message: e.message } };
    }
    case 'log':
      if (typeof f.message !== 'string') return 'log frame without a string message';
      return { type: 'log', id: f.id, message: f.message, ...(typeof f.level === 'string' ? { level: f.level } : {}) };
    default:
      return {
        type: 'progress',
        id: f.id,
        progress: f.progress ?? null,
        ...(typeof f.message === 'string' ? { message: f.message } : {}),
      };
  }
}

export interface CollectedOutput {
  terminal: Extract<Frame, { type: 'result' | 'error' }> | null;
  /** Kept log/progress frames (the first maxKeptFrames), in order. */
  frames: Extract<Frame, { type: 'log' | 'progress' }>[];
  framesSeen: number;
  violation: { kind: OutputViolation; message: string } | null;
  stdoutBytes: number;
  stderrBytes: number;
  /** The last maxStderrBytes of stderr, decoded as UTF-8. */
  stderr: string;
  stderrTruncated: boolean;
  firstFrameAt: number | null;
}

/**
 * Consumes stdout/stderr bytes. `onBreach` fires once, synchronously, on the first violation (the caller kills
 * the container); `onTerminal` fires once on the result or error frame. After either, stdout is only counted.
 */
export class FrameCollector {
  readonly #limits: OutputLimits;
  readonly #id: string | null;
  #pending: Buffer[] = [];
  #pendingBytes = 0;
  #oversized = false;
  #stderr: Buffer[] = [];
  #stderrKept = 0;
  readonly out: CollectedOutput = {
    terminal: null,
    frames: [],
    framesSeen: 0,
    violation: null,
    stdoutBytes: 0,
    stderrBytes: 0,
    stderr: '',
    stderrTruncated: false,
    firstFrameAt: null,
  };

  constructor(
    limits: OutputLimits,
    invocationId: string | null,
    private readonly hooks: {
      onBreach?: (v: OutputViolation) => void;
      onTerminal?: () => void;
      onFrame?: (f: Frame) => void;
      now?: () => number;
    } = {},
  ) {
    this.#limits = limits;
    this.#id = invocationId;
  }

  get done(): boolean {
    return this.out.terminal !== null || this.out.violation !== null;
  }

  #breach(kind: OutputViolation, message: string): void {
    if (this.done) return;
    this.out.violation = { kind, message };
    this.#pending = [];
    this.#pendingBytes = 0;
    this.hooks.onBreach?.(kind);
  }

  stdout(chunk: Buffer): void {
    this.out.stdoutBytes += chunk.length;
    if (this.done) return;
    if (this.out.stdoutBytes > this.#limits.maxStdoutBytes) {
      this.#breach('output-limit', `the worker wrote more than ${this.#limits.maxStdoutBytes} bytes to stdout`);
      return;
    }
    let off = 0;
    while (off < chunk.length && !this.done) {
      const nl = chunk.indexOf(0x0a, off);
      const end = nl === -1 ? chunk.length : nl;
      this.#append(chunk.subarray(off, end));
      if (nl === -1) return;
      this.#endLine();
      off = nl + 1;
    }
  }

  #append(part: Buffer): void {
    if (part.length === 0) return;
    this.#pendingBytes += part.length;
    if (this.#pendingBytes > this.#limits.maxFrameBytes) {
      this.#oversized = true;
      this.#pending = [];
      return;
    }
    this.#pending.push(part);
  }

  #endLine(): void {
    const size = this.#pendingBytes;
    const oversized = this.#oversized;
    const line = oversized ? null : Buffer.concat(this.#pending);
    this.#pending = [];
    this.#pendingBytes = 0;
    this.#oversized = false;
    if (oversized) {
      this.#breach('frame-too-large', `a frame of ${size} bytes exceeds the ${this.#limits.maxFrameBytes}-byte bound`);
      return;
    }
    const text = line!.toString('utf8').replace(/\r$/, '');
    if (text.trim() === '') return;
    if (jsonDepthExceeds(text, this.#limits.maxFrameDepth)) {
      this.#breach('frame-too-deep', `a frame is nested deeper than ${this.#limits.maxFrameDepth} levels`);
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      this.#breach('malformed-frame', `stdout line is not JSON: ${JSON.stringify(text.slice(0, 120))}`);
      return;
    }
    const frame = checkFrame(value, this.#id);
    if (typeof frame === 'string') {
      this.#breach('malformed-frame', frame);
      return;
    }
    this.out.framesSeen += 1;
    this.out.firstFrameAt ??= (this.hooks.now ?? Date.now)();
    this.hooks.onFrame?.(frame);
    if (frame.type === 'result' || frame.type === 'error') {
      this.out.terminal = frame;
      this.hooks.onTerminal?.();
    } else if (this.out.frames.length < this.#limits.maxKeptFrames) {
      this.out.frames.push(frame);
    }
  }

  stderr(chunk: Buffer): void {
    this.out.stderrBytes += chunk.length;
    const max = this.#limits.maxStderrBytes;
    if (max <= 0) {
      this.out.stderrTruncated ||= chunk.length > 0;
      return;
    }
    const part = chunk.length > max ? chunk.subarray(chunk.length - max) : chunk;
    this.#stderr.push(part);
    this.#stderrKept += part.length;
    while (this.#stderrKept > max && this.#stderr.length > 0) {
      const first = this.#stderr[0]!;
      const excess = this.#stderrKept - max;
      if (first.length <= excess) {
        this.#stderr.shift();
        this.#stderrKept -= first.length;
      } else {
        this.#stderr[0] = first.subarray(excess);
        this.#stderrKept -= excess;
      }
      this.out.stderrTruncated = true;
    }
  }

  /** The stream ended: a last unterminated line is judged like any other. Returns the final picture. */
  finish(): CollectedOutput {
    if (!this.done && (this.#pendingBytes > 0 || this.#oversized)) this.#endLine();
    this.out.stderr = Buffer.concat(this.#stderr).toString('utf8');
    return this.out;
  }
}
