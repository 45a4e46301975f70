// The proxy's connection reports: every connection attempted, allowed, refused, closed or cut, and every DNS query,
// numbered in order and kept in a bounded ring for the supervisor to read (GET /reports?after=<seq>).
//
// The ring is bounded because a hostile sandbox can make reports as fast as it can open sockets: the oldest go
// first, and a reader that fell behind is told how many it lost rather than holding the proxy's memory hostage.
// A reader may wait (long-poll) for the next report instead of asking again and again.
import type { EgressRefusalCode } from '../../../domain/at-run/egress-codes.ts';

export type ReportKind = 'connect' | 'http' | 'dns' | 'request';
/** allowed: the proxy connects; refused: it does not; closed: an allowed connection ended; cut: a limit ended it. */
export type ReportDecision = 'allowed' | 'refused' | 'closed' | 'cut';

export interface EgressReport {
  /** 1, 2, 3…: the order the proxy saw them in. */
  seq: number;
  /** The grant's key (the supervisor's name for the execution). */
  executionKey: string;
  kind: ReportKind;
  /** As the request named it ('' when it named none that could be read). */
  host: string;
  port: number;
  /** The checked address the proxy connected to (allowed, closed, cut). */
  address?: string;
  decision: ReportDecision;
  code?: EgressRefusalCode;
  reason?: string;
  bytesUp: number;
  bytesDown: number;
  /** ISO 8601. */
  at: string;
}

export type NewReport = Omit<EgressReport, 'seq' | 'at' | 'bytesUp' | 'bytesDown'> &
  Partial<Pick<EgressReport, 'bytesUp' | 'bytesDown'>>;

export interface ReportPage {
  reports: EgressReport[];
  /** The seq to ask after next time. */
  next: number;
  /** Reports after `after` that the ring no longer holds. */
  lost: number;
}

export interface ReportLog {
  add(report: NewReport): EgressReport;
  /** Reports after `after` (and of `key` only, when given), at most `limit`; waits up to `waitMs` for one. */
  read(opts: { after: number; limit: number; waitMs: number; key?: string }): Promise<ReportPage>;
  /** The seq of the newest report (0 before any). */
  last(): number;
  /** Answers every waiting reader now (on shutdown). */
  close(): void;
}

/** A ring of at most `capacity` reports. */
export function createReportLog(capacity: number, now: () => Date = () => new Date()): ReportLog {
  const ring: EgressReport[] = [];
  let seq = 0;
  let closed = false;
  const waiters = new Set<() => void>();

  function page(after: number, limit: number, key?: string): ReportPage {
    const oldest = ring[0]?.seq ?? seq + 1;
    const lost = Math.max(0, Math.min(oldest - 1, seq) - Math.max(after, 0));
    const reports: EgressReport[] = [];
    let next = Math.max(after, oldest - 1);
    for (let i = Math.max(0, after + 1 - oldest); i < ring.length && reports.length < limit; i++) {
      const r = ring[i] as EgressReport;
      next = r.seq;
      if (key === undefined || r.executionKey === key) reports.push(r);
    }
    return { reports, next: Math.min(next, seq), lost };
  }

  return {
    add(report) {
      const full: EgressReport = { bytesUp: 0, bytesDown: 0, ...report, seq: ++seq, at: now().toISOString() };
      ring.push(full);
      if (ring.length > capacity) ring.shift();
      for (const wake of [...waiters]) wake();
      return full;
    },
    async read({ after, limit, waitMs, key }) {
      const first = page(after, limit, key);
      if (first.reports.length > 0 || first.lost > 0 || waitMs <= 0) return first;
      let from = first.next;
      const deadline = Date.now() + waitMs;
      for (;;) {
        const left = deadline - Date.now();
        if (left <= 0 || closed) return page(from, limit, key);
        await new Promise<void>((resolve) => {
          const wake = () => {
            waiters.delete(wake);
            clearTimeout(timer);
            resolve();
          };
          const timer = setTimeout(wake, left);
          waiters.add(wake);
        });
        const p = page(from, limit, key);
        if (p.reports.length > 0 || p.lost > 0) return p;
        from = p.next;
      }
    },
    last: () => seq,
    close() {
      closed = true;
      for (const wake of [...waiters]) wake();
    },
  };
}
