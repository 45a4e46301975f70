// The retention archive as a file, the same whichever log wrote it (SQLite's sqlite/archive.ts, PostgreSQL's
// postgres/archive.ts): JSON lines, gzip: an archive header, one history per actor exactly as `runlog export`
// writes it (a history header, then its events in version order), then a trailer naming the chain link the archive
// ends on. It is written to a temporary file beside its name and linked into place only once complete and fsynced,
// so a kill leaves either no archive or a whole one; an existing file is never replaced.
import { closeSync, fsyncSync, linkSync, openSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { dirname } from 'node:path';
import { gzipSync } from 'node:zlib';
import { RunlogError } from '../../domain/errors.ts';
import { historyHeaderLine } from '../../domain/history.ts';
import type { ChainedEventFields } from '../chain.ts';

/** The archive container's format; the histories inside are `runlog export`'s format 1. */
export const ARCHIVE_FORMAT = 1;

export class ArchiveExistsError extends RunlogError {
  constructor(file: string) {
    super('ARCHIVE_EXISTS', `${file} already exists; an archive is never overwritten (give another --out)`, { file });
  }
}

/** Compressed output written as gzip members of about 1 MB each (a multi-member gzip file is one stream to readers). */
export class GzipWriter {
  private chunk: string[] = [];
  private size = 0;
  bytes = 0;
  private readonly digest = createHash('sha256');
  constructor(private readonly fd: number) {}
  line(text: string): void {
    this.chunk.push(text, '\n');
    this.size += text.length + 1;
    if (this.size >= 1 << 20) this.flush();
  }
  flush(): void {
    if (this.size === 0) return;
    const z = gzipSync(this.chunk.join(''));
    this.chunk = [];
    this.size = 0;
    let off = 0;
    while (off < z.length) off += writeSync(this.fd, z, off);
    this.digest.update(z);
    this.bytes += z.length;
  }
  sha256(): string {
    return this.digest.digest('hex');
  }
}

export function fsyncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** One archived event as the archive holds it: data and meta are the stored JSON text (what its link hashed). */
export interface ArchivedEvent extends ChainedEventFields {
  data: string;
  meta: string;
  hash: Buffer;
  /** The link before it, written only where that event is not in this archive. */
  prev?: Buffer;
}

/** An archive being written: the lines go to a temporary file that link() puts in place under `out`. */
export class ArchiveFileWriter {
  private readonly gzip: GzipWriter;
  private open = true;
  /** True once the complete file stands under `out`. */
  linked = false;

  private constructor(
    readonly out: string,
    private readonly tmp: string,
    private readonly fd: number,
  ) {
    this.gzip = new GzipWriter(fd);
  }

  /** Starts the archive `out`: refused (ArchiveExistsError) when that file exists already. */
  static create(out: string): ArchiveFileWriter {
    try {
      statSync(out);
      throw new ArchiveExistsError(out);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    const tmp = `${out}.partial-${process.pid}`;
    return new ArchiveFileWriter(out, tmp, openSync(tmp, 'wx', 0o600));
  }

  header(h: { createdAt: string; before: string; log: string; actors: number }): void {
    this.gzip.line(
      JSON.stringify({
        runlog: 'archive',
        format: ARCHIVE_FORMAT,
        createdAt: h.createdAt,
        before: h.before,
        log: h.log,
        actors: h.actors,
      }),
    );
  }

  /** An actor's history header (`runlog export`'s); its events follow. */
  history(a: { kind: string; id: string; stream: string; version: number }, exportedAt: string): void {
    this.gzip.line(historyHeaderLine(a, exportedAt));
  }

  event(e: ArchivedEvent): void {
    this.gzip.line(
      `{"seq":${e.seq},"stream":${JSON.stringify(e.stream)},"version":${e.version},"type":${JSON.stringify(e.type)},` +
        `"schema":${e.schema},"data":${e.data},"meta":${e.meta},"at":${JSON.stringify(e.at)},` +
        `"hash":"${e.hash.toString('hex')}"${e.prev ? `,"prev":"${e.prev.toString('hex')}"` : ''}}`,
    );
  }

  trailer(t: {
    actors: number;
    events: number;
    lastSeq: number;
    lastHash: Buffer;
    chainHead: { seq: number; hash: Buffer };
  }): void {
    this.gzip.line(
      JSON.stringify({
        runlog: 'archive-end',
        actors: t.actors,
        events: t.events,
        lastSeq: t.lastSeq,
        lastHash: t.lastHash.toString('hex'),
        chainHead: { seq: t.chainHead.seq, hash: t.chainHead.hash.toString('hex') },
      }),
    );
  }

  /** Writes out what is buffered, fsyncs and closes the temporary file. */
  complete(): void {
    this.gzip.flush();
    fsyncSync(this.fd);
    closeSync(this.fd);
    this.open = false;
  }

  /** Links the complete file into place under `out` (failing when one appeared meanwhile: never replaced). */
  link(): void {
    linkSync(this.tmp, this.out);
    this.linked = true;
    unlinkSync(this.tmp);
    fsyncDir(dirname(this.out));
  }

  /** Bytes of the compressed file, and its SHA-256 (once complete). */
  get bytes(): number {
    return this.gzip.bytes;
  }
  sha256(): string {
    return this.gzip.sha256();
  }

  /** After a failure before link(): closes and removes the temporary file. */
  discard(): void {
    if (this.open) {
      try {
        closeSync(this.fd);
      } catch {
        /* closed already */
      }
    }
    try {
      unlinkSync(this.tmp);
    } catch {
      /* not there */
    }
  }

  /** After link() when the log did not record the archive: it still holds everything, so the file is only a copy. */
  removeCopy(): void {
    try {
      unlinkSync(this.out);
    } catch {
      /* keep it: it is complete anyway */
    }
  }
}
