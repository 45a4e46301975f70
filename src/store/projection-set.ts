// The projections registered with a store, and the pure part of running them: which documents an append
// touches and how they fold. Each store does the IO (load, write back) inside its own append transaction.
import { RunlogError, ValidationError } from '../domain/errors.ts';
import type { RecordedEvent } from '../domain/events.ts';
import type { Projection } from './port.ts';

/** Every event of one append that one projection document reads, in global order. */
export interface ProjectionTarget {
  projection: Projection<unknown>;
  id: string;
  events: RecordedEvent[];
}

export class UnknownProjectionError extends RunlogError {
  constructor(name: string, known: readonly string[]) {
    super(
      'STORE_UNKNOWN_PROJECTION',
      `no projection named ${name} is registered with this store (registered: ${known.join(', ') || 'none'})`,
      { name, known },
    );
  }
}

export class ProjectionSet {
  private readonly byName = new Map<string, Projection<unknown>>();
  private readonly types = new Map<Projection<unknown>, Set<string> | null>();

  constructor(projections: readonly Projection<any>[] = []) {
    const issues: string[] = [];
    for (const p of projections) {
      if (typeof p?.name !== 'string' || p.name.length === 0) issues.push('a projection has no name');
      else if (this.byName.has(p.name)) issues.push(`projection ${p.name} is registered twice`);
      else if (typeof p.evolve !== 'function') issues.push(`projection ${p.name} has no evolve function`);
      else {
        this.byName.set(p.name, p);
        this.types.set(p, p.canHandle ? new Set(p.canHandle) : null);
      }
    }
    if (issues.length > 0) throw new ValidationError('STORE_PROJECTIONS', 'invalid projections', issues);
  }

  get size(): number {
    return this.byName.size;
  }

  names(): string[] {
    return [...this.byName.keys()];
  }

  get(name: string): Projection<unknown> {
    const p = this.byName.get(name);
    if (!p) throw new UnknownProjectionError(name, this.names());
    return p;
  }

  /** The documents these events change, each with its events in order (empty when no projection reads them). */
  targets(events: readonly RecordedEvent[], only?: Projection<unknown>): ProjectionTarget[] {
    if (this.byName.size === 0) return [];
    const out = new Map<string, ProjectionTarget>();
    for (const p of only ? [only] : this.byName.values()) {
      const types = this.types.get(p);
      for (const e of events) {
        if (types && !types.has(e.type)) continue;
        const id = p.documentId ? p.documentId(e) : e.stream;
        if (id === null) continue;
        const key = `${p.name}\u0000${id}`;
        let t = out.get(key);
        if (!t) out.set(key, (t = { projection: p, id, events: [] }));
        t.events.push(e);
      }
    }
    return [...out.values()];
  }
}

/** A projection threw while folding an append's events: the append was rolled back (nothing of it committed). */
export class ProjectionFailedError extends RunlogError {
  constructor(projection: string, id: string, event: RecordedEvent, cause: unknown) {
    const why = cause instanceof Error ? cause.message : String(cause);
    super(
      'STORE_PROJECTION',
      `projection ${projection} failed on ${event.type} (stream ${event.stream} version ${event.version}, document ${id}): ` +
        `${why}. Nothing from this append was committed.`,
      { projection, id, stream: event.stream, version: event.version, type: event.type },
      { cause },
    );
  }
}

/** Folds a document through events (null = no document / deleted). */
export function foldDocument(target: ProjectionTarget, doc: unknown): unknown {
  let d = doc ?? null;
  for (const e of target.events) {
    try {
      d = target.projection.evolve(d, e) ?? null;
    } catch (err) {
      throw new ProjectionFailedError(target.projection.name, target.id, e, err);
    }
  }
  return d;
}
