// An execution's code archive made ready: the blob from its author's PDS (CID verified), validated and re-written,
// started early during resolution (code-prefetch.ts) and taken by materialize. One place owns the prefetches and
// the cache of verified archives, so resolve, materialize and cleanup agree on what an archive is keyed by.
import { assertValidArchive, entriesUnder, writeArchive } from '../../adapters/archive/index.ts';
import type { AtprotoReader } from '../../adapters/atproto/index.ts';
import type { OperatorPolicy } from '../../domain/at-run/operator-policy.ts';
import { CodePrefetch, VerifiedCodeCache, type PreparedCode } from './code-prefetch.ts';

/** What a prepared code archive is: the blob (from its author's PDS) and the entrypoint it was checked for. */
export const codeKey = (author: string, blobCid: string, entrypoint: string): string =>
  `${author}\n${blobCid}\n${entrypoint}`;

export class CodePreparation {
  private readonly prefetch = new CodePrefetch();
  private readonly verifiedCode = new VerifiedCodeCache();

  constructor(
    private readonly reader: AtprotoReader,
    private readonly policy: OperatorPolicy,
  ) {}

  /** Starts preparing this execution's code in the background (replacing an earlier start's). */
  start(executionId: string, author: string, blobCid: string, entrypoint: string, deadlineAt?: number): void {
    this.prefetch.start(executionId, codeKey(author, blobCid, entrypoint), () =>
      this.prepare(author, blobCid, entrypoint, deadlineAt),
    );
  }

  /** The code the resolution started preparing for exactly this blob and entrypoint, else prepared now. */
  take(
    executionId: string,
    author: string,
    blobCid: string,
    entrypoint: string,
    deadlineAt?: number,
  ): Promise<PreparedCode> {
    return (
      this.prefetch.take(executionId, codeKey(author, blobCid, entrypoint)) ??
      this.prepare(author, blobCid, entrypoint, deadlineAt)
    );
  }

  /** Forgets an execution's prefetch (it failed before materializing, or was cancelled). */
  drop(executionId: string): void {
    this.prefetch.drop(executionId);
  }

  /** 10 and the checks before 11: the blob from the author's PDS (CID verified), validated, re-written. */
  private async prepare(
    author: string,
    blobCid: string,
    entrypoint: string,
    deadlineAt?: number,
  ): Promise<PreparedCode> {
    // Called only with the blob CID a verified code record names (or a hint, used only if the record still names
    // it): bytes that hashed to that CID and passed validation before are the same bytes.
    const key = codeKey(author, blobCid, entrypoint);
    const known = this.verifiedCode.get(key);
    if (known) return known;
    const blob = await this.reader.fetchBlob(author, blobCid, deadlineAt === undefined ? {} : { deadlineAt });
    // A view, not a copy: the validator takes its own private copy of the bytes it checks.
    const bytes = Buffer.from(blob.bytes.buffer, blob.bytes.byteOffset, blob.bytes.byteLength);
    const report = await assertValidArchive(bytes, this.policy.archive, { kind: 'code', entrypoint });
    const archive = await writeArchive(entriesUnder(report.entries, report.topLevel[0]!));
    const prepared = { cid: blob.cid, size: blob.size, entries: report.entries.length, archive };
    this.verifiedCode.set(key, prepared);
    return prepared;
  }
}
