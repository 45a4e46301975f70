// A PostgreSQL supervisor's appends as they go out (host-store.ts): each request's events checked for JSON first, a
// cluster node's fenced by its leases and signed with its name, and the leases and live snapshots kept in step with
// what committed. Kept apart from the store because this is the lease bookkeeping around one append; the store then
// only puts what committed into its copy of the log.
import { EventEncodingError, FencedError } from '../../domain/errors.ts';
import type { NewEvent } from '../../domain/events.ts';
import type { AppendObserver } from '../capabilities.ts';
import { toJson, type StreamAppend, type StreamAppendOutcome } from '../port.ts';
import type { PgEventStore } from './event-store.ts';
import type { LeaseBeat } from './lease-beat.ts';
import type { Leases } from './leases.ts';
import type { PgLeasing } from './leasing.ts';
import type { LiveSnapshots } from './live-snapshots.ts';

/** What an append goes out through: the store underneath, this node's leases (null: not a cluster node), and more. */
export interface AppendSender {
  pg: PgEventStore;
  leases: Leases | null;
  leaseBeat: LeaseBeat | null;
  leasing: PgLeasing | null;
  snapshots: LiveSnapshots;
  /** Hears each append's time and events (metrics), when one is set. */
  observer(): AppendObserver | undefined;
}

/** The requests' outcomes so far (null: sent) and what was sent, with PostgreSQL's outcome for each sent one. */
export interface SentAppends {
  outcomes: (StreamAppendOutcome | null)[];
  sent: StreamAppend[];
  results: StreamAppendOutcome[];
}

/** The outcome of a request with an event JSON cannot encode (it fails alone), or null. */
function unencodable(r: StreamAppend): StreamAppendOutcome | null {
  for (const e of r.events) {
    try {
      toJson(e.data, 'data');
      toJson(e.meta ?? {}, 'meta');
    } catch (err) {
      return { ok: false, error: new EventEncodingError(r.stream, e.type, (err as Error).message, { cause: err }) };
    }
  }
  return null;
}

export async function sendAppends(s: AppendSender, requests: readonly StreamAppend[]): Promise<SentAppends> {
  // Like SQLite: an event JSON cannot encode fails its own request, not the batch it was committed with.
  const outcomes: (StreamAppendOutcome | null)[] = requests.map(unencodable);
  // A cluster node appends to an actor's stream only under its lease (lease-beat.ts: claims and refusals).
  const claim = s.leaseBeat ? s.leaseBeat.gate(requests, outcomes) : new Set<string>();
  const sent = requests.filter((_, i) => outcomes[i] === null);
  // A cluster node signs what it appends (meta.node): ps and the inspector say where an actor last ran.
  const node = s.leases?.node;
  const signed = (events: readonly NewEvent[]): readonly NewEvent[] =>
    node ? events.map((e) => ({ ...e, meta: { ...e.meta, node } })) : events;
  const appends: StreamAppend[] = sent.map((r) => ({
    stream: r.stream,
    events: signed(r.events),
    expectedVersion: r.expectedVersion,
  }));
  const t0 = s.observer() ? performance.now() : 0;
  const claimed = new Map<string, number>();
  const fence = s.leases
    ? {
        fence: {
          node: s.leases.node,
          tokens: s.leases.held,
          ttlMs: s.leases.ttlMs,
          ...(claim.size > 0 ? { claim: { streams: claim, ttlMs: s.leases.ttlMs, claimed } } : {}),
        },
      }
    : {};
  const snapshots = sent.some((r) => r.snapshot) ? { snapshots: sent.map((r) => r.snapshot) } : {};
  for (const c of claim) s.leaseBeat?.claiming.add(c);
  let results: StreamAppendOutcome[];
  try {
    results = appends.length > 0 ? await s.pg.appendMany(appends, { ...fence, ...snapshots }) : [];
  } catch (err) {
    // Cut off: a claim may have committed with its reply lost. Its lease then names this node, unknown to it:
    // the next beat looks (pickUp) once PostgreSQL answers.
    if (claim.size > 0) s.leasing?.pickUpSoon();
    throw err;
  } finally {
    for (const c of claim) s.leaseBeat?.claiming.delete(c);
  }
  for (const [stream, token] of claimed) s.leases?.held.set(stream, token);
  const fenced: string[] = [];
  results.forEach((o, i) => {
    const r = sent[i]!;
    if (!o.ok && o.error instanceof FencedError && s.leases?.held.delete(r.stream)) fenced.push(r.stream);
    // An actor that ended gives its lease back at the next beat.
    if (o.ok && r.row?.status === 'terminal') s.leaseBeat?.ending.add(r.stream);
    s.snapshots.appended(r, o);
  });
  // A lease found taken at append time is lost like one found taken at renewal (the listener lets go of it).
  if (fenced.length > 0) s.leaseBeat?.lost(fenced);
  const observer = s.observer();
  if (observer)
    observer(
      (performance.now() - t0) / 1000,
      results.reduce((n, o) => n + (o.ok ? o.result.events.length : 0), 0),
    );
  return { outcomes, sent, results };
}
