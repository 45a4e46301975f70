// OpenTelemetry traces through the API package only: users register their own SDK and exporter, and with none
// registered every call here is a no-op (no span is tracked, nothing is recorded in events).
// One trace per execution and per spawn: a root span from the actor's creation to its outcome, and a child span
// per step (each state the actor passes through on the way), carrying the actor id and stream versions. The trace
// id goes into the first event's meta, so the log (and the inspector) links an actor to its trace.
import { context, isSpanContextValid, SpanStatusCode, trace, type Span, type TracerProvider } from '@opentelemetry/api';
import type { ActorKind } from '../../domain/events.ts';
import type { Bus, TransitionNotice } from '../host/bus.ts';

const TRACER = 'runlog';

/** States after which a spawn's trace is over (it reached running, or did not). */
const spawnEnded = (state: string) =>
  state === 'running' || state.startsWith('crashed') || state === 'stopped' || state === 'lost' || state === 'stopping';
const executionEnded = (state: string) => state === 'succeeded' || state === 'failed';

interface Tracked {
  kind: ActorKind;
  root: Span;
  step: Span | null;
}

export class RunlogTracing {
  private readonly active = new Map<string, Tracked>();
  private readonly off: () => void;

  constructor(
    bus: Bus,
    private readonly provider?: TracerProvider,
  ) {
    this.off = bus.on('actor:transition', (t) => this.onTransition(t));
  }

  /** The host calls this as an actor is created: starts its trace; returns what goes into the first event's meta. */
  created(kind: ActorKind, id: string): Record<string, unknown> | undefined {
    const tracer = (this.provider ?? trace.getTracerProvider()).getTracer(TRACER);
    const root = tracer.startSpan(kind === 'execution' ? 'execution' : 'instance.spawn', {
      attributes: { 'runlog.actor.id': id, 'runlog.actor.kind': kind },
    });
    const sc = root.spanContext();
    if (!isSpanContextValid(sc) || !root.isRecording()) {
      root.end();
      return undefined; // no SDK: nothing to link
    }
    this.active.set(id, { kind, root, step: null });
    return { traceId: sc.traceId, spanId: sc.spanId };
  }

  close(): void {
    this.off();
    for (const t of this.active.values()) {
      t.step?.end();
      t.root.setStatus({ code: SpanStatusCode.ERROR, message: 'the supervisor closed first' });
      t.root.end();
    }
    this.active.clear();
  }

  private onTransition(t: TransitionNotice): void {
    const tracked = this.active.get(t.id);
    if (!tracked) return;
    const version = t.event.version;
    if (t.event.type === 'execution.step' && tracked.step) {
      tracked.step.addEvent(String(t.event.data.name ?? 'step'), { 'runlog.stream.version': version });
    }
    if (!t.accepted || t.from === t.to) return;
    if (tracked.step) {
      tracked.step.setAttribute('runlog.stream.version.end', version);
      tracked.step.end();
      tracked.step = null;
    }
    const ended = tracked.kind === 'execution' ? executionEnded(t.to) : spawnEnded(t.to);
    if (ended) {
      this.active.delete(t.id);
      const ok = t.to === 'succeeded' || t.to === 'running';
      tracked.root.setAttributes({ 'runlog.stream.version': version, 'runlog.outcome': t.to });
      if (ok) tracked.root.setStatus({ code: SpanStatusCode.OK });
      else
        tracked.root.setStatus({
          code: SpanStatusCode.ERROR,
          message: String(t.event.data.reason ?? t.event.data.code ?? t.to),
        });
      tracked.root.end();
      return;
    }
    const tracer = (this.provider ?? trace.getTracerProvider()).getTracer(TRACER);
    tracked.step = tracer.startSpan(
      `${t.kind}.${t.to}`,
      {
        attributes: {
          'runlog.actor.id': t.id,
          'runlog.actor.kind': t.kind,
          'runlog.stream.version': version,
          'runlog.state': t.to,
        },
      },
      trace.setSpan(context.active(), tracked.root),
    );
  }
}
