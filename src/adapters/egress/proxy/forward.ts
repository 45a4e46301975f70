// Plain HTTP through the proxy: a request with an absolute `http://` URI is sent on to the granted name's checked
// address, and the answer comes back, every byte of both counted against the grant.
//
// Hop-by-hop headers (RFC 9110 7.6.1: Connection and those it names, Keep-Alive, TE, Trailer, Transfer-Encoding,
// Upgrade) and the proxy's own (Proxy-Authorization, Proxy-Connection, Proxy-Authenticate) never pass, either way.
// Each request opens its own upstream connection (no pooling: a connection belongs to one decision) and closes it
// after. An https:// URI is refused: TLS goes through CONNECT, where the proxy never sees inside.
import { request, type IncomingMessage, type ServerResponse } from 'node:http';
import { admitFlow, refusalBody, refusalStatus, type FlowContext } from './flow-admission.ts';
import type { Flow, Gate } from './grant-state.ts';

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Raw header pairs without the hop-by-hop ones, those the Connection header names, and `drop`. */
export function endToEndHeaders(raw: readonly string[], drop: readonly string[] = []): [string, string][] {
  const named = new Set<string>(drop);
  for (let i = 0; i < raw.length; i += 2)
    if ((raw[i] as string).toLowerCase() === 'connection')
      for (const token of (raw[i + 1] as string).split(',')) named.add(token.trim().toLowerCase());
  const out: [string, string][] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    if (!HOP_BY_HOP.has(name) && !named.has(name)) out.push([raw[i] as string, raw[i + 1] as string]);
  }
  return out;
}

/** The headers as Node's request and writeHead take them: a repeated header as an array of its values. */
function headerObject(pairs: readonly [string, string][]): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of pairs) {
    const key = k.toLowerCase();
    const had = out[key];
    out[key] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v];
  }
  return out;
}

const headerBytes = (first: string, pairs: readonly [string, string][]): number =>
  Buffer.byteLength(first) + 2 + pairs.reduce((n, [k, v]) => n + Buffer.byteLength(k) + Buffer.byteLength(v) + 4, 2);

function answerRefusal(res: ServerResponse, refused: Gate): void {
  if (res.destroyed) return;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = refusalBody(refused);
  res.writeHead(refusalStatus(refused.code), {
    'x-egress-refused': refused.code,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    connection: 'close',
  });
  res.end(body);
}

/** The absolute http:// URI of a proxy request, or why it is not one. */
export function targetOf(rawUrl: string): { url: URL; host: string; port: number } | { invalid: string } {
  if (!/^http:\/\//i.test(rawUrl))
    return {
      invalid: /^https:\/\//i.test(rawUrl)
        ? 'an https:// URI is not proxied as plain HTTP: use CONNECT'
        : 'a proxy request needs an absolute http:// URI',
    };
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    return { invalid: 'the URI does not parse' };
  }
  if (url.username !== '' || url.password !== '') return { invalid: 'the URI carries credentials' };
  return { url, host: url.hostname, port: url.port === '' ? 80 : Number(url.port) };
}

/** Sends the admitted request on and the answer back, counting both. */
function forward(ctx: FlowContext, flow: Flow, req: IncomingMessage, res: ServerResponse, to: Upstream): void {
  const { state } = ctx;
  const pairs = endToEndHeaders(req.rawHeaders, ['host', 'expect']);
  const path = `${to.url.pathname}${to.url.search}`;
  if (!state.charge(flow, 'up', headerBytes(`${req.method} ${path} HTTP/1.1`, pairs))) return;
  const upstream = request({
    host: to.address,
    family: to.family,
    port: to.port,
    method: req.method,
    path,
    headers: { ...headerObject(pairs), host: to.url.host, connection: 'close' },
    setHost: false,
    agent: false,
  });
  flow.destroy = () => {
    upstream.destroy();
    res.destroy();
  };
  const timer = setTimeout(() => upstream.destroy(new Error('connect timed out')), ctx.connectTimeoutMs);
  upstream.on('socket', (s) => s.once('connect', () => clearTimeout(timer)));
  upstream.on('close', () => clearTimeout(timer));
  upstream.on('error', (err) => {
    if (flow.phase !== 'allowed') return;
    state.end(flow, 'EGRESS_UPSTREAM_FAILED', `${to.address}:${to.port}: ${err.message}`);
    answerRefusal(res, { code: 'EGRESS_UPSTREAM_FAILED', reason: `${to.url.host} did not answer` });
  });
  req.on('data', (chunk: Buffer) => {
    if (!state.charge(flow, 'up', chunk.length)) return;
    if (!upstream.write(chunk)) {
      req.pause();
      upstream.once('drain', () => req.resume());
    }
  });
  req.on('end', () => upstream.end());
  upstream.on('response', (answer) => {
    const back = endToEndHeaders(answer.rawHeaders);
    if (!state.charge(flow, 'down', headerBytes(`HTTP/1.1 ${answer.statusCode}`, back))) return;
    try {
      res.writeHead(answer.statusCode ?? 502, headerObject(back));
    } catch (err) {
      // A header Node's client read but its server will not write: the answer cannot be relayed as it is.
      state.end(flow, 'EGRESS_UPSTREAM_FAILED', `the answer's headers: ${(err as Error).message}`);
      res.destroy();
      return;
    }
    answer.on('data', (chunk: Buffer) => {
      if (!state.charge(flow, 'down', chunk.length)) return;
      if (!res.write(chunk)) {
        answer.pause();
        res.once('drain', () => answer.resume());
      }
    });
    answer.on('end', () => {
      res.end();
      state.end(flow);
    });
  });
  res.on('close', () => {
    upstream.destroy();
    state.end(flow);
  });
}

interface Upstream {
  url: URL;
  port: number;
  address: string;
  family: 4 | 6;
}

/** Handles one plain-HTTP proxy request (the HTTP server's 'request' event). */
export function handleRequest(ctx: FlowContext, req: IncomingMessage, res: ServerResponse): void {
  const { state } = ctx;
  const target = targetOf(req.url ?? '');
  if ('invalid' in target) {
    const refused: Gate = { code: 'EGRESS_REQUEST_INVALID', reason: target.invalid };
    state.refuseAttempt('http', '', 0, refused.code, refused.reason);
    answerRefusal(res, refused);
    return;
  }
  const destroy = () => res.destroy();
  void admitFlow(ctx, 'http', { host: target.host, port: target.port }, destroy).then((admitted) => {
    if ('refused' in admitted) return answerRefusal(res, admitted.refused);
    if (res.destroyed) return state.end(admitted.flow);
    forward(ctx, admitted.flow, req, res, { ...target, address: admitted.address, family: admitted.family });
  });
}
