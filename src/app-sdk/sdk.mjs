// runlog app SDK — plain ESM JavaScript on node:http, no dependencies, so the SAME file runs inside both
// sandboxes (which cannot see the repo's node_modules) and is imported by TypeScript through index.ts.
// Apps copy it next to their code (examples/hello-app/runlog-app-sdk.mjs is a copy of this file, kept equal
// by test/unit/instances/app-sdk-copy.test.ts: a symlink would not survive `npm pack`).
//
// What it does for an app:
//   - stamps its identity on EVERY response: headers `x-app-id` and `x-app-instance-id`
//   - serves <basePath>/api/lifecycle/health  (GET/HEAD → 200 { status: 'ok', appId, instanceId })
//   - serves <basePath>/api/lifecycle/{onCreate,onStart,onPause,onResume,onStop}  (POST, JSON body)
//     hook answers: handler result as JSON (200), no result → 204, handler throws → 500 { error }
// Identity defaults to the sandbox's $APP_ID / $APP_INSTANCE_ID.

import { Buffer } from 'node:buffer';
import { createServer } from 'node:http';
import process from 'node:process';

export const LIFECYCLE_HOOKS = Object.freeze(['onCreate', 'onStart', 'onPause', 'onResume', 'onStop']);
export const IDENTITY_HEADERS = Object.freeze({ appId: 'x-app-id', instanceId: 'x-app-instance-id' });
const MAX_BODY = 1 << 20;

export function resolveIdentity(opts = {}) {
  const appId = opts.appId ?? process.env.APP_ID;
  const instanceId = opts.instanceId ?? process.env.APP_INSTANCE_ID;
  if (!appId || !instanceId) {
    throw new Error(
      'runlog app SDK: appId and instanceId are required (pass them, or run under runlog, which sets APP_ID and APP_INSTANCE_ID)',
    );
  }
  return { appId, instanceId };
}

export function normalizeBasePath(basePath = '') {
  if (basePath !== '' && !/^(\/[A-Za-z0-9._~-]+)*\/?$/.test(basePath))
    throw new Error(`runlog app SDK: invalid basePath '${basePath}'`);
  return basePath.replace(/\/$/, '');
}

export function stampIdentity(res, identity) {
  res.setHeader(IDENTITY_HEADERS.appId, identity.appId);
  res.setHeader(IDENTITY_HEADERS.instanceId, identity.instanceId);
}

function sendJson(res, status, value) {
  const body = JSON.stringify(value);
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
}

function readJson(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(Object.assign(new Error('body too large'), { status: 413 }));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8').trim();
      if (text === '') return resolve(undefined);
      try {
        resolve(JSON.parse(text));
      } catch {
        reject(Object.assign(new Error('body is not valid JSON'), { status: 400 }));
      }
    });
    req.on('error', reject);
  });
}

/**
 * Middleware: `(req, res, next?) => boolean`. Stamps identity on the response; answers lifecycle routes and
 * returns true; otherwise calls `next()` (when given) and returns false.
 */
export function createLifecycleMiddleware(opts = {}) {
  const identity = resolveIdentity(opts);
  const prefix = `${normalizeBasePath(opts.basePath)}/api/lifecycle/`;
  const handlers = opts.handlers ?? {};
  return function runlogLifecycle(req, res, next) {
    stampIdentity(res, identity);
    const path = (req.url ?? '/').split('?')[0];
    if (!path.startsWith(prefix)) {
      if (next) next();
      return false;
    }
    const hook = path.slice(prefix.length);
    void (async () => {
      try {
        if (hook === 'health') {
          if (req.method !== 'GET' && req.method !== 'HEAD') return sendJson(res, 405, { error: 'use GET' });
          let extra = {};
          try {
            extra = (await handlers.health?.(identity)) ?? {};
          } catch (e) {
            return sendJson(res, 503, { status: 'unhealthy', error: String(e?.message ?? e), ...identity });
          }
          return sendJson(res, 200, { ...extra, status: 'ok', ...identity });
        }
        if (!LIFECYCLE_HOOKS.includes(hook)) return sendJson(res, 404, { error: `no lifecycle hook '${hook}'` });
        if (req.method !== 'POST') return sendJson(res, 405, { error: 'use POST' });
        const body = await readJson(req);
        const result = await handlers[hook]?.(body, { ...identity, hook });
        if (result === undefined) {
          res.writeHead(204);
          return res.end();
        }
        return sendJson(res, 200, result);
      } catch (e) {
        if (!res.headersSent) sendJson(res, e?.status ?? 500, { error: String(e?.message ?? e) });
        else res.destroy();
      }
    })();
    return true;
  };
}

/**
 * An http.Server for an app: lifecycle routes and identity stamping from createLifecycleMiddleware, every
 * other request to `opts.handler(req, res)` (404 when absent). The caller calls `.listen()`.
 */
export function createAppServer(opts = {}) {
  const lifecycle = createLifecycleMiddleware(opts);
  return createServer((req, res) => {
    if (lifecycle(req, res)) return;
    if (opts.handler) {
      Promise.resolve()
        .then(() => opts.handler(req, res))
        .catch((e) => {
          if (!res.headersSent) sendJson(res, 500, { error: String(e?.message ?? e) });
          else res.destroy();
        });
      return;
    }
    sendJson(res, 404, { error: 'not found' });
  });
}
