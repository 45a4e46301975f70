// What PgHostStore's parts are opened with, from the store's own options: the PostgreSQL event store underneath and
// the in-memory copy of the log (log-copy.ts). Kept apart from the store because these are plain translations of
// one set of options into others, with their defaults, and the store's own work starts once its parts exist.
import type { PgEventStoreOptions } from './event-store.ts';
import { REQUEST_KEEP_MS, type PgHostStoreOptions } from './host-store-options.ts';
import type { LogCopyOptions } from './log-copy.ts';
import { splitStoreUrl } from './url.ts';

/** The newest positions a paging-out copy holds whatever their stream (followers and subscribers read from there). */
export const KEEP_RECENT = 10_000;

/** The event store underneath: the URL without its `?schema=`, which names the schema unless `schema` does. */
export function eventStoreOptions(options: PgHostStoreOptions): PgEventStoreOptions {
  const split = splitStoreUrl(options.url);
  return {
    url: split.url,
    schema: options.schema ?? split.schema ?? 'runlog',
    ...(options.projections ? { projections: options.projections } : {}),
    ...(options.upcasters ? { upcasters: options.upcasters } : {}),
    ...(options.now ? { now: options.now } : {}),
    ...(options.maxConnections ? { maxConnections: options.maxConnections } : {}),
    ...(options.faults ? { faults: options.faults } : {}),
    ...(options.node ? { holdLimitMs: options.node.leaseTtlMs } : {}), // a stopped client's locks last a TTL at most
  };
}

/**
 * The copy of the log: everything held unless `pageOut` is set; `ended` says which streams are ended actors', and
 * `forget` hears of each the copy drops whole.
 */
export function logCopyOptions(
  options: PgHostStoreOptions,
  ended: (stream: string) => boolean,
  forget: (stream: string) => void,
): LogCopyOptions {
  const pageOut = options.pageOut ?? null;
  const now = options.now;
  return {
    keepRecent: pageOut ? (pageOut.keepRecent ?? KEEP_RECENT) : null,
    ended,
    forget,
    ...(pageOut?.requestStreams
      ? {
          tail: {
            is: pageOut.requestStreams.is,
            keepMs: pageOut.requestStreams.keepMs ?? REQUEST_KEEP_MS,
            now: now ? () => Date.parse(now()) : () => Date.now(),
          },
        }
      : {}),
  };
}
