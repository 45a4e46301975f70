// The supervisor's logs: one JSON object per line on stderr (pino) with level, time, node and, for what
// concerns an actor, its id, kind and the event's version, so logs can be searched and joined with the log.
// On a terminal the same records are printed as short human lines by a formatter of ours (no pino-pretty:
// one dependency less at run time).
import { hostname } from 'node:os';
import { pino, type Level, type Logger } from 'pino';
import type { Bus } from '../supervisor/host/bus.ts';
import { UsageError } from '../domain/errors.ts';

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export function parseLogLevel(value: string | undefined): LogLevel {
  if (value === undefined) return 'info';
  if ((LOG_LEVELS as readonly string[]).includes(value)) return value as LogLevel;
  throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(', ')}, not '${value}'`);
}

interface Writable {
  write(chunk: string): unknown;
  isTTY?: boolean;
}

/**
 * The supervisor's logger. `node` is the name the supervisor goes by (`serve --node`, a cluster node's name): lines
 * of several nodes on one host are told apart by it; without one (SQLite: the only node there is) the host name.
 */
export function createLogger(
  options: { level?: LogLevel; stream?: Writable; pretty?: boolean; node?: string } = {},
): Logger {
  const stream = options.stream ?? process.stderr;
  const pretty = options.pretty ?? stream.isTTY === true;
  return pino(
    {
      level: options.level ?? 'info',
      base: { node: options.node ?? hostname(), pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    pretty
      ? { write: (line: string) => stream.write(formatLine(line)) }
      : { write: (line: string) => stream.write(line) },
  );
}

const LEVEL_TAG: Record<string, string> = {
  fatal: 'FATAL',
  error: 'ERROR',
  warn: 'WARN ',
  info: 'INFO ',
  debug: 'DEBUG',
  trace: 'TRACE',
};
const OMIT = new Set(['level', 'time', 'msg', 'node', 'pid']);

/** One JSON log line → `12:04:05.123 INFO  message  actorId=… version=…` (the TTY form). */
export function formatLine(line: string): string {
  let r: Record<string, unknown>;
  try {
    r = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line;
  }
  const time = typeof r.time === 'string' ? r.time.slice(11, 23) : '';
  const fields = Object.entries(r)
    .filter(([k]) => !OMIT.has(k))
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
  return `${time} ${LEVEL_TAG[String(r.level)] ?? String(r.level)} ${String(r.msg ?? '')}${fields ? `  ${fields}` : ''}\n`;
}

/** Logs what happens to actors: transitions at debug, rejections, crashes and effect failures louder. Returns an unsubscribe. */
export function logActors(bus: Bus, logger: Logger): () => void {
  const offs = [
    bus.on('actor:transition', (t) => {
      const fields = {
        actorId: t.id,
        kind: t.kind,
        version: t.event.version,
        event: t.event.type,
        from: t.from,
        to: t.to,
      };
      if (!t.accepted) logger.warn(fields, `${t.kind} ${t.id} rejected an event it cannot take in ${t.from}`);
      else if (logger.isLevelEnabled('debug' satisfies Level))
        logger.debug(fields, `${t.kind} ${t.id}: ${t.from} → ${t.to}`);
    }),
    bus.on('app:crashed', (c) =>
      logger.warn(
        { actorId: c.instanceId, kind: 'instance', app: c.appId, crash: c.crash },
        `instance ${c.instanceId} crashed`,
      ),
    ),
    bus.on('execution:finished', (e) =>
      logger.info(
        { actorId: e.executionId, kind: 'execution', status: e.status, failure: e.failure },
        `execution ${e.executionId} ${e.status}`,
      ),
    ),
    bus.on('effect:error', (e) =>
      logger.error({ actorId: e.id, kind: e.kind, effect: e.effect, err: e.error }, `effect ${e.effect} failed`),
    ),
  ];
  return () => offs.forEach((off) => off());
}
