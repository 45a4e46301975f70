// validateArchiveStream: the validator of validate.ts over an archive as it arrives (a runtime export being
// downloaded), writing the canonical archive of what it has accepted so far as it goes (for the upload into the
// volume), so the download, the validation and the upload overlap instead of running one after the other.
//
// The checks are the same, in the same order, with the same report:
//  - the strict header audit (header-audit.ts) runs ahead over the bytes received; tar-stream is only ever given
//    bytes the audit has already walked (up to the next unaudited header), so neither parser reads a header the
//    other has not judged;
//  - each entry tar-stream emits is compared with the audit's record and checked against the virtual tree when
//    its header arrives; its data is passed on as it arrives (views, no copy);
//  - the whole-tree checks (symlink resolution, emptiness), the differential count and the refusals (size,
//    compression, empty) are decided at the end.
// The output stops at the first violation (its iterator throws ArchiveRejectedError) and ends with the tar's end
// marker only once the whole archive has passed: a consumer that extracts it gets a complete archive only from a
// valid input. What it extracted before a late verdict is the caller's to throw away (the materializer removes
// the volume; it never seals one whose archive failed). The report always covers the whole input.
import { once } from 'node:events';
import { extract, pack, type Header } from 'tar-stream';
import { RunlogError } from '../../domain/errors.ts';
import type { ArchiveLimits } from '../../domain/at-run/archive-limits.ts';
import { ByteChunks } from './chunks.ts';
import { ArchiveRejectedError } from './errors.ts';
import { HeaderAudit, type AuditRecord } from './header-audit.ts';
import { Checker } from './entry-checker.ts';
import { checkedOptions, compareViews, compression, seenEntry, type SeenEntry } from './validate.ts';
import { canonicalHeader, SevenDigitChecksums } from './write.ts';
import type { ArchiveEntry, ArchiveReport, ValidateOptions } from './types.ts';

/** The report's rejection when the consumer of `pieces` stopped before the verdict (the input was not read to its end). */
export class ArchiveStreamAbandonedError extends RunlogError {
  constructor() {
    super('ARCHIVE_STREAM_ABANDONED', 'the archive stream was abandoned by its consumer before the verdict');
  }
}

export interface ArchiveStream {
  /**
   * The canonical archive (as packArchive writes it) of the entries accepted so far; ends after the verdict when
   * the archive is valid, throws ArchiveRejectedError (the violations found so far) at the first violation. Read it once, to its end or
   * until it throws; stopping early abandons the validation (the report then rejects).
   */
  pieces: AsyncGenerator<Buffer, void, undefined>;
  /** The same report validateArchive gives for these bytes (file contents are not kept: no `data`/`content`). */
  report: Promise<ArchiveReport>;
}

const sameView = (a: AuditRecord | undefined, t: SeenEntry): boolean =>
  a !== undefined &&
  a.offset === t.offset &&
  a.name === t.name &&
  a.linkname === t.linkname &&
  a.size === t.size &&
  a.tsType === t.type;

/**
 * Validates the archive `source` yields (chunks it hands over: held by reference, not copied, and not changed
 * afterwards), against the same rules as validateArchive. Throws ARCHIVE_OPTIONS_INVALID at once for bad options.
 * An error thrown by `source` rejects the report (and the pieces) with that error.
 */
export function validateArchiveStream(
  source: AsyncIterable<Buffer>,
  limits: ArchiveLimits,
  opts: ValidateOptions,
): ArchiveStream {
  const prefix = checkedOptions(limits, opts);
  const run = new StreamRun(limits, opts, prefix);
  const report = run.run(source);
  report.catch(() => undefined); // the caller awaits it; an early failure must not count as unhandled
  return { report, pieces: run.pieces() };
}

type EntrySink = NodeJS.EventEmitter & { write(chunk: Buffer): boolean; end(): void };

class StreamRun {
  readonly #limits: ArchiveLimits;
  readonly #buf = new ByteChunks([]);
  readonly #audit: HeaderAudit;
  readonly #checker: Checker;
  readonly #ex = extract();
  readonly #seen: SeenEntry[] = [];
  /** Bytes handed to tar-stream. */
  #fed = 0;
  #parseError: string | undefined;
  #stoppedEarly = false;
  /** tar-stream was stopped on purpose: what it says after that is not a finding. */
  #parserStopped = false;
  #parserDone = false;
  #diverged = false;
  readonly #out = pack();
  #outClosed = false;
  #cancelled = false;
  readonly #outWoken: Promise<void>;
  #wakeOut!: () => void;
  readonly #parserWoken: Promise<void>;
  #wakeParser!: () => void;

  constructor(limits: ArchiveLimits, opts: ValidateOptions, prefix: string[]) {
    this.#limits = limits;
    this.#audit = new HeaderAudit(limits);
    this.#checker = new Checker(limits, opts, prefix, 'parts');
    this.#outWoken = new Promise((resolve) => (this.#wakeOut = resolve));
    this.#parserWoken = new Promise((resolve) => (this.#wakeParser = resolve));
    this.#ex.on('error', () => undefined); // reported through the parse loop
    this.#out.on('error', () => undefined); // reported through pieces()
  }

  #clean(): boolean {
    return (
      this.#audit.violations.length === 0 &&
      this.#checker.violations.length === 0 &&
      !this.#diverged &&
      this.#parseError === undefined
    );
  }

  /** Stops the output: with an error (a violation, an abandonment), or, once the archive passed, by ending it. */
  #closeOutput(err?: Error): void {
    if (this.#outClosed) return;
    this.#outClosed = true;
    if (err) this.#out.destroy(err);
    else this.#out.finalize();
    this.#wakeOut();
  }

  #reject(): void {
    this.#closeOutput(new ArchiveRejectedError([...this.#audit.violations, ...this.#checker.violations]));
  }

  #stopParser(): void {
    this.#parserStopped = true;
    this.#ex.destroy();
  }

  /** Waits until `stream` drains, or until `unless` settles (waiting no longer matters). */
  async #drain(stream: NodeJS.EventEmitter, unless: Promise<void>): Promise<void> {
    const drained = once(stream, 'drain').then(
      () => undefined,
      () => undefined,
    );
    await Promise.race([drained, unless]);
  }

  async *pieces(): AsyncGenerator<Buffer, void, undefined> {
    const checksums = new SevenDigitChecksums();
    try {
      for await (const piece of this.#out as AsyncIterable<Buffer>) yield* checksums.push(piece);
    } finally {
      if (!this.#outClosed) {
        // The consumer went away before the verdict (the upload failed): stop reading.
        this.#cancelled = true;
        this.#closeOutput(new ArchiveStreamAbandonedError());
        this.#stopParser();
      }
    }
  }

  /** Hands tar-stream the bytes up to `limit` (views, no copy). */
  async #feed(limit: number): Promise<void> {
    if (limit <= this.#fed) return;
    const views = [...this.#buf.views(this.#fed, limit)];
    this.#fed = limit;
    for (const v of views) {
      if (this.#cancelled || this.#parserDone) return;
      if (!this.#ex.write(v)) await this.#drain(this.#ex, this.#parserWoken);
    }
  }

  async run(source: AsyncIterable<Buffer>): Promise<ArchiveReport> {
    const parsing = this.#parse();
    try {
      return await this.#read(source, parsing);
    } catch (err) {
      this.#closeOutput(err instanceof Error ? err : new Error(String(err)));
      this.#stopParser();
      await parsing;
      throw err;
    }
  }

  /** A refusal decided before parsing (validateArchive's `refusal`): nothing is parsed or written. */
  async #refuse(
    parsing: Promise<void>,
    code: 'ARCHIVE_TOO_LARGE' | 'COMPRESSED_ARCHIVE' | 'EMPTY_ARCHIVE',
    message: string,
  ): Promise<ArchiveReport> {
    const report: ArchiveReport = {
      ok: false,
      violations: [{ code, message }],
      entries: [],
      expandedBytes: 0,
      topLevel: [],
    };
    this.#closeOutput(new ArchiveRejectedError(report.violations));
    this.#stopParser();
    await parsing;
    return report;
  }

  async #read(source: AsyncIterable<Buffer>, parsing: Promise<void>): Promise<ArchiveReport> {
    const limits = this.#limits;
    const buf = this.#buf;
    const audit = this.#audit;
    let magicChecked = false;
    for await (const chunk of source as AsyncIterable<Uint8Array>) {
      if (this.#cancelled) break;
      if (!(chunk instanceof Uint8Array)) throw new TypeError('an archive stream yields Buffers');
      if (chunk.length === 0) continue;
      if (buf.length + chunk.length > limits.maxArchiveBytes) {
        return this.#refuse(
          parsing,
          'ARCHIVE_TOO_LARGE',
          `the archive is larger than ${limits.maxArchiveBytes} bytes (the limit); it was not read further`,
        );
      }
      buf.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
      if (!magicChecked && buf.length >= 8) {
        magicChecked = true;
        const c = compression(buf.slice(0, 8));
        if (c)
          return this.#refuse(
            parsing,
            'COMPRESSED_ARCHIVE',
            `the archive is ${c}-compressed; only plain tar is accepted`,
          );
      }
      audit.advance(buf, false);
      if (!this.#clean()) this.#reject();
      await this.#feed(Math.min(buf.length, audit.done ? audit.trustedEnd(buf.length) : audit.auditedEnd));
      // Keep only what the audit or tar-stream may still read; once the audit is done, nothing more is read.
      buf.release(audit.done ? buf.length : Math.min(this.#fed, audit.auditedEnd));
    }
    if (this.#cancelled) {
      await parsing;
      throw new ArchiveStreamAbandonedError();
    }
    if (!magicChecked) {
      const c = compression(buf.slice(0, buf.length)); // fewer than 8 bytes: nothing was released
      if (c)
        return this.#refuse(
          parsing,
          'COMPRESSED_ARCHIVE',
          `the archive is ${c}-compressed; only plain tar is accepted`,
        );
    }
    if (buf.length === 0) return this.#refuse(parsing, 'EMPTY_ARCHIVE', 'the archive is empty (0 bytes)');

    audit.advance(buf, true);
    const trusted = audit.trustedEnd(buf.length);
    if (this.#fed > trusted) {
      // The archive ended inside the data of an entry tar-stream has begun; validateArchive's tar-stream would
      // never have seen that entry. Stop it here: the parse loop takes the entry back.
      this.#stopParser();
    } else {
      await this.#feed(trusted);
      if (trusted < buf.length && !this.#parserDone) this.#ex.write(Buffer.alloc(1024)); // a fresh end marker
      this.#ex.end(Buffer.alloc(0));
    }
    await parsing;
    if (this.#cancelled) throw new ArchiveStreamAbandonedError();

    const checker = this.#checker;
    checker.violations.unshift(...audit.violations); // as validateArchive has them: the audit's first (finish() counts them)
    if (this.#parseError !== undefined) checker.add('PARSE_ERROR', `tar-stream: ${this.#parseError}`);
    compareViews(
      audit.records,
      {
        seen: this.#seen,
        stoppedEarly: this.#stoppedEarly,
        ...(this.#parseError !== undefined ? { error: this.#parseError } : {}),
      },
      (code, message, path) => checker.add(code, message, path),
    );
    const topLevel = checker.finish();
    const violations = checker.violations;
    const report: ArchiveReport = {
      ok: violations.length === 0,
      violations,
      entries: checker.entries,
      expandedBytes: checker.expandedBytes,
      topLevel,
    };
    this.#closeOutput(report.ok ? undefined : new ArchiveRejectedError(violations));
    return report;
  }

  /** tar-stream's side: each entry checked at its header, written out while all is clean, its data passed on. */
  async #parse(): Promise<void> {
    const checker = this.#checker;
    const it = this.#ex[Symbol.asyncIterator]();
    let open = false;
    try {
      for (;;) {
        const r = await it.next();
        if (r.done) break;
        const entry = r.value;
        const h = entry.header;
        const i = this.#seen.length;
        const seen = seenEntry(entry);
        this.#seen.push(seen);
        if (++checker.count > this.#limits.maxEntries) {
          checker.add('TOO_MANY_ENTRIES', `more than ${this.#limits.maxEntries} entries; parsing stopped`, h.name);
          this.#stoppedEarly = true;
          this.#reject();
          break;
        }
        if (h.type === 'directory' && h.size > 0) {
          // tar-stream never ends such an entry's stream; the audit refuses it before we get here.
          this.#parseError = `directory ${h.name} carries ${h.size} bytes`;
          this.#reject();
          break;
        }
        if (!sameView(this.#audit.records[i], seen)) this.#diverged = true; // reported by compareViews at the end
        checker.mark();
        open = true;
        const before = checker.entries.length;
        checker.onEntry(h, undefined);
        const accepted: ArchiveEntry | undefined = checker.entries.length > before ? checker.entries.at(-1) : undefined;
        let sink: EntrySink | null = null;
        if (!this.#clean()) this.#reject();
        else if (accepted && !this.#outClosed) sink = this.#write(accepted);
        let received = 0;
        for await (const chunk of entry as AsyncIterable<Buffer>) {
          received += chunk.length;
          if (sink && !this.#outClosed && !sink.write(chunk)) await this.#drain(sink, this.#outWoken);
        }
        if (received !== h.size) throw new Error(`entry ${h.name} ended after ${received} of ${h.size} bytes`);
        open = false;
        if (sink && !this.#outClosed) sink.end();
      }
    } catch (err) {
      if (open) {
        // Its data never all arrived: it counts as never seen, as with validateArchive.
        checker.rollback();
        if (this.#parserStopped) this.#seen.pop();
      }
      if (!this.#parserStopped) {
        this.#parseError = err instanceof Error ? err.message : String(err);
        this.#reject();
      }
    } finally {
      this.#parserDone = true;
      this.#wakeParser();
      await it.return?.().catch(() => undefined);
    }
  }

  /** Writes an accepted entry's header to the output; returns the sink for a regular file's data. */
  #write(e: ArchiveEntry): EntrySink | null {
    const header: Header = canonicalHeader(e);
    if (e.type !== 'file') {
      this.#out.entry(header);
      return null;
    }
    if (e.size === 0) {
      this.#out.entry(header, Buffer.alloc(0));
      return null;
    }
    const sink = this.#out.entry(header) as unknown as EntrySink; // why: tar-stream types its entry sink loosely; it is a streamx Writable
    sink.on('error', () => undefined); // destroyed with the output when it closes early; reported through pieces()
    return sink;
  }
}
