// The ephemeral pub/sub a remote `logs --follow` rides on (supervisor/cluster/remote-follow.ts): PostgreSQL LISTEN/NOTIFY,
// outside the event log. Nodes of a cluster know no address or token of each other, only the database they share,
// so the database carries the stream too; nothing of it is stored (a notification lives until every listener of
// that moment has read it).
//
// - LISTEN on one dedicated connection per node (a pooled connection is handed to others between queries and would
//   drop the LISTEN). When it breaks, every follow channel it listened on is told (their followers end: they may
//   have missed frames) and the connection is made again with the control channels listened on anew.
// - NOTIFY through the pool (`SELECT pg_notify($1, $2)`): any connection will do, and one at a time per follow, so
//   that the packets of one follow commit (and are delivered) in the order they were sent.
import { createHash } from 'node:crypto';
import pg from 'pg';

/** PostgreSQL truncates identifiers (channel names too) to 63 bytes: ours are hashes, never that long. */
const hash = (s: string): string => createHash('sha256').update(s).digest('hex').slice(0, 40);

/** The channel a node takes follow requests on: one per node and log (schema), hashed (node names may be long). */
export function controlChannel(schema: string, node: string): string {
  return `rlfc_${hash(`${schema}\0${node}`)}`;
}

/** The channel one follow's frames go to (its follow id is random: 128 bits). */
export function followChannel(followId: string): string {
  return `rlff_${followId}`;
}

/** What the follow roles need of the pub/sub (a fake stands in for it in unit tests). */
export interface FollowBus {
  /**
   * Listens on a channel; resolves once the LISTEN is in effect (a NOTIFY sent after that is heard). `onBroken` is
   * called once if the connection breaks while listening (notifications may have been missed).
   */
  listen(channel: string, onPayload: (payload: string) => void, onBroken?: () => void): Promise<() => void>;
  notify(channel: string, payload: string): Promise<void>;
}

interface Listening {
  onPayload: (payload: string) => void;
  onBroken: (() => void) | undefined;
}

export interface PgFollowBusOptions {
  /** A postgres:// URL without runlog's `?schema=` (postgres/host-store.ts splitStoreUrl). */
  url: string;
  /** One statement through the log's pool (PgEventStore.sql). */
  sql(text: string, params: unknown[]): Promise<unknown>;
  log(message: string): void;
}

export class PgFollowBus implements FollowBus {
  private client: pg.Client | null = null;
  private connecting: Promise<pg.Client> | null = null;
  private readonly channels = new Map<string, Listening>();
  private retry: NodeJS.Timeout | undefined;
  private closed = false;
  /** Aborted by close(): a connect still out is ended at once and its waiters are told (see connect()). */
  private readonly closing = new AbortController();

  constructor(private readonly o: PgFollowBusOptions) {}

  async listen(channel: string, onPayload: (payload: string) => void, onBroken?: () => void): Promise<() => void> {
    if (this.closed) throw new Error('follow bus closed');
    this.channels.set(channel, { onPayload, onBroken });
    try {
      const c = await this.connect();
      await c.query(`LISTEN "${channel}"`);
    } catch (err) {
      this.channels.delete(channel);
      throw err;
    }
    return () => {
      if (this.channels.get(channel)?.onPayload !== onPayload) return;
      this.channels.delete(channel);
      this.client?.query(`UNLISTEN "${channel}"`).catch(() => undefined);
    };
  }

  async notify(channel: string, payload: string): Promise<void> {
    await this.o.sql('SELECT pg_notify($1, $2)', [channel, payload]);
  }

  close(): void {
    this.closed = true;
    this.closing.abort();
    if (this.retry) clearTimeout(this.retry);
    this.channels.clear();
    const c = this.client;
    this.client = null;
    c?.end().catch(() => undefined);
  }

  private connect(): Promise<pg.Client> {
    if (this.client) return Promise.resolve(this.client);
    this.connecting ??= (async () => {
      const c = new pg.Client({ connectionString: this.o.url, connectionTimeoutMillis: 10_000 });
      const broken = (): void => this.broken(c);
      c.on('error', broken);
      c.on('end', broken);
      c.on('notification', (n) => {
        if (n.payload !== undefined) this.channels.get(n.channel)?.onPayload(n.payload);
      });
      try {
        await untilClosed(c.connect(), this.closing.signal);
      } catch (err) {
        // A failed connect, or close() while connecting: the connection is ended here, or it would be made after
        // close() and held open for good (close() saw no client), keeping the process alive. node-postgres never
        // settles the connect() of a client ended while connecting, hence the race rather than connect() alone.
        c.end().catch(() => undefined);
        throw err;
      } finally {
        this.connecting = null;
      }
      if (this.closed) {
        // Connected just as close() came (after the race was won): not kept either.
        c.end().catch(() => undefined);
        throw new Error('follow bus closed');
      }
      this.client = c;
      return c;
    })();
    return this.connecting;
  }

  /**
   * The LISTEN connection is gone: follow channels' listeners are told and forgotten (their followers end); those
   * without an onBroken (the node's control channel) are listened on again on a new connection.
   */
  private broken(c: pg.Client): void {
    if (this.client !== c) return;
    this.client = null;
    c.end().catch(() => undefined);
    if (this.closed) return;
    for (const [channel, l] of [...this.channels]) {
      if (!l.onBroken) continue;
      this.channels.delete(channel);
      l.onBroken();
    }
    this.o.log('follow: the LISTEN connection broke; connecting again');
    const again = (): void => {
      this.retry = undefined;
      if (this.closed || this.channels.size === 0) return;
      void (async () => {
        try {
          const n = await this.connect();
          for (const channel of this.channels.keys()) await n.query(`LISTEN "${channel}"`);
        } catch {
          if (!this.closed && !this.retry) this.retry = setTimeout(again, 1000).unref();
        }
      })();
    };
    this.retry = setTimeout(again, 1000).unref();
  }
}

/** The promise, or a rejection as soon as the signal aborts (checked first: an abort before the call rejects at once). */
function untilClosed<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    p.catch(() => undefined);
    return Promise.reject(new Error('follow bus closed'));
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new Error('follow bus closed'));
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err as Error);
      },
    );
  });
}
