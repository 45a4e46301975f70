// ByteChunks: an archive held as the list of buffers it arrived in (a download's chunks), read by offset.
//
// Why: a runtime export is ~100 MB, and on the VMs runlog targets touching fresh memory is what costs (a copy
// of 100 MB into a new buffer takes seconds there, not milliseconds). The header audit reads 512-byte blocks
// and small metadata payloads by offset; tar-stream takes the chunks as they are; file contents stay views into
// the original chunks all the way to the re-packed upload. Only a range that straddles two chunks is copied,
// and those are header-sized.

export class ByteChunks {
  readonly length: number;
  readonly #chunks: readonly Buffer[];
  /** #starts[i] is the offset of #chunks[i]. */
  readonly #starts: number[];

  constructor(chunks: readonly Buffer[]) {
    this.#chunks = chunks.filter((c) => c.length > 0);
    this.#starts = [];
    let off = 0;
    for (const c of this.#chunks) {
      this.#starts.push(off);
      off += c.length;
    }
    this.length = off;
  }

  static of(buf: Buffer): ByteChunks {
    return new ByteChunks([buf]);
  }

  /** The index of the chunk holding byte `offset` (offset < length). */
  #indexOf(offset: number): number {
    let lo = 0;
    let hi = this.#starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (this.#starts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /** Bytes [start, end) (clamped to the data): a view when they lie in one chunk, else a copy. */
  slice(start: number, end: number = this.length): Buffer {
    const s = Math.max(0, Math.min(start, this.length));
    const e = Math.max(s, Math.min(end, this.length));
    if (s === e) return Buffer.alloc(0);
    const i = this.#indexOf(s);
    const chunk = this.#chunks[i]!;
    const at = s - this.#starts[i]!;
    if (at + (e - s) <= chunk.length) return chunk.subarray(at, at + (e - s));
    return Buffer.concat([...this.views(s, e)], e - s);
  }

  /** Views of bytes [start, end), chunk by chunk (no copy). */
  *views(start = 0, end: number = this.length): Generator<Buffer> {
    const e = Math.min(end, this.length);
    let pos = Math.max(0, start);
    if (pos >= e) return;
    for (let i = this.#indexOf(pos); i < this.#chunks.length && pos < e; i++) {
      const c = this.#chunks[i]!;
      const from = pos - this.#starts[i]!;
      const to = Math.min(c.length, e - this.#starts[i]!);
      yield c.subarray(from, to);
      pos = this.#starts[i]! + to;
    }
  }

  /** Whether every byte from `start` to the end is zero (true when there are none). */
  isZeroFrom(start: number): boolean {
    for (const v of this.views(start)) {
      for (let i = 0; i < v.length; i++) if (v[i] !== 0) return false;
    }
    return true;
  }
}
