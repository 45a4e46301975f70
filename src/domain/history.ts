// The history format: what `runlog export` writes and `runlog archive` holds for each actor (a header line, then
// its recorded events in version order, as JSON lines). One declaration, so writer and reader agree on the number.
import type { ActorKind, RecordedEvent } from './events.ts';

/** The file format `runlog export` writes; a reader refuses formats newer than it knows. */
export const HISTORY_FORMAT = 1;

export interface HistoryHeader {
  runlog: 'history';
  format: number;
  kind: ActorKind;
  id: string;
  stream: string;
  /** The actor's version (its number of events) when exported. */
  version: number;
  exportedAt: string;
}

export interface History {
  header: HistoryHeader;
  events: RecordedEvent[];
}

/** An actor's history header line (JSON), in today's format; its events follow, one a line. */
export function historyHeaderLine(
  a: { kind: string; id: string; stream: string; version: number },
  exportedAt: string,
): string {
  return JSON.stringify({
    runlog: 'history',
    format: HISTORY_FORMAT,
    kind: a.kind,
    id: a.id,
    stream: a.stream,
    version: a.version,
    exportedAt,
  });
}
