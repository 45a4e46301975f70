// An execution's latency waterfall: where its time went, step by step, from its events. Pure.
//
// The phases start at their events' timestamps (requested → resolved → materialized → started → outcome), so the
// appends between steps are in the picture; inside a phase the durations come from the outcome event's
// `profile` (recorded since pre-started sandboxes; older logs have none and show the phases only).

export interface WaterfallRow {
  step: string;
  /** ms from the request. */
  offsetMs: number;
  ms: number;
}

interface EventLike {
  type: string;
  at: string;
  data?: unknown;
}

type Profile = Record<string, number | boolean | null | undefined>;

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** The rows of an execution's waterfall, in order; [] for an execution that was never requested. */
export function executionWaterfall(events: readonly EventLike[], profile?: Profile | null): WaterfallRow[] {
  const at = (type: string) => {
    const e = events.find((x) => x.type === type);
    return e ? Date.parse(e.at) : null;
  };
  const t0 = at('execution.requested');
  if (t0 === null) return [];
  const outcome = events.find((e) => e.type === 'execution.succeeded' || e.type === 'execution.failed');
  const p: Profile = profile ?? (outcome?.data as { profile?: Profile } | undefined)?.profile ?? {};
  const rows: WaterfallRow[] = [];
  const push = (step: string, from: number | null, ms: number | null) => {
    if (from === null || ms === null || ms < 0) return;
    rows.push({ step, offsetMs: Math.round((from - t0) * 10) / 10, ms: Math.round(ms * 10) / 10 });
  };
  const resolved = at('execution.resolved');
  const materialized = at('execution.materialized');
  const started = at('execution.started');
  const ended = outcome ? Date.parse(outcome.at) : null;
  push('resolve', t0, num(p.resolveMs) ?? (resolved !== null ? resolved - t0 : null));
  push(
    'materialize',
    resolved,
    num(p.materializeMs) ?? (resolved !== null && materialized !== null ? materialized - resolved : null),
  );
  push(
    p.prestarted === true ? 'create (pre-started: claimed)' : 'create',
    materialized,
    num(p.createMs) ?? (materialized !== null && started !== null ? started - materialized : null),
  );
  if (started !== null && num(p.invokeMs) !== null) {
    const attach = num(p.attachMs) ?? 0;
    const envelope = started + attach + (num(p.adapterReadyMs) ?? num(p.startMs) ?? 0);
    push('attach', started, attach);
    push(p.prestarted === true ? 'start (done ahead of time)' : 'start', started + attach, num(p.startMs));
    push('adapter ready (envelope sent)', started + attach, num(p.adapterReadyMs));
    push('first frame', envelope, num(p.firstFrameMs));
    push('result', envelope, num(p.resultMs));
    push('exit', envelope, num(p.exitMs));
  } else push('run', started, started !== null && ended !== null ? ended - started : null);
  if (ended !== null) push('total (to the outcome event)', t0, ended - t0);
  return rows;
}

/** Text bars for a terminal, scaled to the longest row. */
export function renderWaterfall(rows: readonly WaterfallRow[], width = 40): string[] {
  const end = Math.max(1, ...rows.map((r) => r.offsetMs + r.ms));
  const label = Math.max(...rows.map((r) => r.step.length), 4);
  return rows.map((r) => {
    const from = Math.round((r.offsetMs / end) * width);
    const len = Math.max(r.ms > 0 ? 1 : 0, Math.round((r.ms / end) * width));
    const bar = `${' '.repeat(from)}${'█'.repeat(len)}`.padEnd(width);
    return `${r.step.padEnd(label)}  ${bar}  ${String(r.ms).padStart(8)} ms  @${r.offsetMs}`;
  });
}
