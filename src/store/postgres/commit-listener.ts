// Hearing of other processes' commits to a PostgreSQL log: LISTEN on one dedicated connection, made when the first
// listener asks, reconnected after an error, ended when the last one goes.
import pg from 'pg';

export class CommitListener {
  /** Who hears of other processes' commits (LISTEN on one dedicated connection, made when the first one asks). */
  private readonly listeners = new Set<() => void>();
  private listener: pg.Client | null = null;
  private relisten: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly url: string,
    private readonly channel: string,
  ) {}

  /**
   * Calls `onCommit` whenever any process commits an append to this log (LISTEN/NOTIFY on a connection of its
   * own, reconnected after an error; after a reconnect it is called once, since notifications sent meanwhile are
   * lost). A wake-up, not a delivery: the caller reads by position, and keeps polling as the fallback.
   */
  listen(onCommit: () => void): () => void {
    this.listeners.add(onCommit);
    if (!this.listener && !this.relisten) void this.connectListener(false);
    return () => {
      this.listeners.delete(onCommit);
      if (this.listeners.size === 0) this.stopListening();
    };
  }

  private async connectListener(reconnected: boolean): Promise<void> {
    this.relisten = undefined;
    if (this.closed || this.listeners.size === 0) return;
    const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 10_000 });
    this.listener = client;
    const retry = (): void => {
      if (this.listener !== client) return;
      this.listener = null;
      client.end().catch(() => undefined);
      if (!this.closed && this.listeners.size > 0 && !this.relisten) {
        this.relisten = setTimeout(() => void this.connectListener(true), 1000);
        this.relisten.unref();
      }
    };
    client.on('error', retry);
    client.on('end', retry);
    client.on('notification', () => {
      for (const l of this.listeners) l();
    });
    try {
      await client.connect();
      await client.query(`LISTEN "${this.channel}"`);
      // Commits made while it was not listening were not announced to it.
      if (reconnected) for (const l of this.listeners) l();
    } catch {
      retry();
    }
  }

  /** Stops listening and forgets every listener (the store closes). */
  close(): void {
    this.closed = true;
    this.listeners.clear();
    this.stopListening();
  }

  private stopListening(): void {
    if (this.relisten) clearTimeout(this.relisten);
    this.relisten = undefined;
    const c = this.listener;
    this.listener = null;
    c?.end().catch(() => undefined);
  }
}
