// Read-time upcasters: old events stay as written; reading lifts them to the current schema of their
// type, one step at a time, so a log written by any earlier runlog always replays.
import { ReplayError } from '../domain/errors.ts';

export interface Upcaster {
  type: string;
  /** The schema this upcaster reads; it returns data of schema + 1. */
  fromSchema: number;
  up(data: Record<string, unknown>): Record<string, unknown>;
}

export class UpcasterRegistry {
  private readonly byKey = new Map<string, Upcaster>();
  private readonly current = new Map<string, number>();

  register(u: Upcaster): this {
    this.byKey.set(`${u.type}@${u.fromSchema}`, u);
    this.current.set(u.type, Math.max(this.current.get(u.type) ?? 1, u.fromSchema + 1));
    return this;
  }

  /** The schema new events of this type are written with. */
  currentSchema(type: string): number {
    return this.current.get(type) ?? 1;
  }

  /** True when data of this type and schema is read as written: no upcaster applies (replay skips `upcast`). */
  isCurrent(type: string, schema: number): boolean {
    return schema === (this.current.get(type) ?? 1);
  }

  upcast(
    type: string,
    schema: number,
    data: Record<string, unknown>,
  ): { schema: number; data: Record<string, unknown> } {
    if (schema === 1 && this.current.size === 0) return { schema, data }; // nothing registered: the common case
    const target = this.currentSchema(type);
    if (schema > target) {
      throw new ReplayError(`event ${type} has schema ${schema}, newer than this runlog knows (${target})`, {
        type,
        schema,
        target,
      });
    }
    let s = schema;
    let d = data;
    while (s < target) {
      const u = this.byKey.get(`${type}@${s}`);
      if (!u)
        throw new ReplayError(`no upcaster for ${type} from schema ${s} to ${target}`, { type, schema: s, target });
      d = u.up(d);
      s += 1;
    }
    return { schema: s, data: d };
  }
}

/** The upcasters runlog ships. Each entry documents the change it bridges. */
export const defaultUpcasters = (): UpcasterRegistry => new UpcasterRegistry();
