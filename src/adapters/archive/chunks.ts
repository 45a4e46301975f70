// ByteChunks: an archive held as the list of buffers it arrived in (a download's chunks), read by offset.
//
// Why: a runtime export is ~100 MB, and on the VMs runlog targets touching fresh memory is what costs (a copy
// of 100 MB into a new buffer takes seconds there, not milliseconds). The header audit reads 512-byte blocks
// and small metadata payloads by offset; tar-stream takes the chunks as they are; file contents stay views into
// the original chunks all the way to the re-packed upload. Only a range that straddles two chunks is copied,
// and those are header-sized.

export class ByteChunks {
  #length = 0;
  readonly #chunks: Buffer[] = [];
  /** #starts[i] is the offset of #chunks[i]. */
  readonly #starts: number[] = [];
  /** Chunks before this index were released (a download read as it arrives: see push and release). */
  #first = 0;

  constructor(chunks: readonly Buffer[]) {
    for (const c of chunks) this.push(c);
  }

  get length(): number {
    return this.#length;
  }

  /** Appends a chunk (held by reference, not copied). */
  push(chunk: Buffer): void {
    if (chunk.length === 0) return;
    this.#chunks.push(chunk);
    this.#starts.push(this.#length);
    this.#length += chunk.length;
  }

  /** Lets go of every chunk that ends at or before `offset`: those bytes must not be read again. */
  release(offset: number): void {
    while (
      this.#first < this.#chunks.length &&
      this.#starts[this.#first]! + this.#chunks[this.#first]!.length <= offset
    ) {
      (this.#chunks as Array<Buffer | undefined>)[this.#first] = undefined;
      this.#first++;
    }
  }

  /** The first byte still held. */
  get heldFrom(): number {
    return this.#first < this.#starts.length ? this.#starts[this.#first]! : this.#length;
  }

  static of(buf: Buffer): ByteChunks {
    return new ByteChunks([buf]);
  }

  /** The index of the chunk holding byte `offset` (offset < length). */
  #indexOf(offset: number): number {
    if (offset < this.heldFrom)
      throw new RangeError(`byte ${offset} was released (bytes from ${this.heldFrom} are held)`);
    let lo = this.#first;
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
