// A projection rebuilt from the whole log on PostgreSQL without a client holding the global append lock between two
// statements: the events are read and folded first, with nothing locked (a page at a time, up to the chain head
// read first), then one statement (projection_replace, postgres/schema.ts migration 9) takes the append lock, checks
// that the head and the archives are still what the fold read, and puts the documents in place of the old ones,
// in a transaction of its own. Appends wait only while the server runs it. If anything was appended meanwhile the
// fold reads on from where it stopped and tries again; an archive meanwhile (events gone) starts it over.
import { RunlogError } from '../../domain/errors.ts';
import { toJson } from '../port.ts';

/** Tries of the replacing statement before the rebuild gives up (STORE_BUSY): appends never paused that long. */
const TRIES = 50;
const PAGE = 1000;

export interface RebuildContext<Row extends { seq: number }> {
  /** One statement on the log's schema (no transaction of its own). */
  sql<R extends Record<string, unknown>>(text: string, params: unknown[]): Promise<R[]>;
  /** The event columns a page selects. */
  columns: string;
  /** Folds a page of rows into the documents (null: deleted). */
  fold(rows: Row[], docs: Map<string, unknown>): void;
  description: string;
}

export async function rebuildProjectionPg<Row extends { seq: number }>(
  name: string,
  ctx: RebuildContext<Row>,
): Promise<{ documents: number; events: number }> {
  let docs = new Map<string, unknown>();
  let events = 0;
  let read = 0; // the fold has every event up to here
  let archivesSeen: number | null = null;
  for (let tries = 1; ; tries++) {
    const [at] = await ctx.sql<{ head: number; archives: number }>(
      'SELECT coalesce((SELECT seq FROM chain_head WHERE id = 1), (SELECT coalesce(max(seq), 0) FROM events))::bigint AS head, ' +
        '(SELECT coalesce(max(id), 0) FROM archives)::bigint AS archives',
      [],
    );
    const head = Number(at!.head);
    const archives = Number(at!.archives);
    if (archivesSeen !== archives) {
      // Events may have left the log since the fold began: from the start.
      docs = new Map();
      events = 0;
      read = 0;
      archivesSeen = archives;
    }
    while (read < head) {
      const rows = await ctx.sql<Row & Record<string, unknown>>(
        `SELECT ${ctx.columns} FROM events WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT ${PAGE}`,
        [read, head],
      );
      if (rows.length === 0) break;
      ctx.fold(rows, docs);
      events += rows.length;
      read = rows.at(-1)!.seq;
    }
    read = head;
    const live = [...docs].filter(([, d]) => d !== null);
    const payload = {
      projection: name,
      head,
      archives,
      ids: live.map(([id]) => id),
      docs: live.map(([id, d]) => toJson(d, `projection ${name} document ${id}`)),
    };
    const [r] = await ctx.sql<{ ok: boolean }>('SELECT projection_replace($1::json) AS ok', [JSON.stringify(payload)]);
    if (r?.ok) return { documents: live.length, events };
    if (tries >= TRIES)
      throw new RunlogError(
        'STORE_BUSY',
        `projection ${name} on ${ctx.description} was not rebuilt: ` +
          `appends went on between each of ${TRIES} folds and their replacing; ` +
          'nothing was changed: try again when the log is quieter',
        { projection: name, tries },
      );
  }
}
