// hello-app: a raw-runtime runlog example on plain node:http and the runlog app SDK.
//   GET /              a greeting
//   GET /env           { env, path: { <dir>: [entries] } } — the sandbox's environment and what its PATH holds
//   GET /which?name=x  { name, path, version } — resolves x through PATH (`command -v`) and runs `x --version`
//   + the SDK's <basePath>/api/lifecycle/* routes; identity headers on every response.
// It listens on $APP_PORT: on 127.0.0.1 under PRoot (shared host network), on 0.0.0.0 in a container.
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createAppServer } from './runlog-app-sdk.mjs';

const manifest = JSON.parse(readFileSync(new URL('./runlog.json', import.meta.url), 'utf8'));
const basePath = manifest.lifecycle?.basePath ?? '';
const events = [];

const json = (res, status, value) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
};
const run = (file, args) =>
  new Promise((resolve) =>
    execFile(file, args, { timeout: 5000 }, (err, stdout) => resolve(err ? null : stdout.trim())),
  );

const server = createAppServer({
  basePath,
  handlers: {
    onCreate: () => void events.push('onCreate'),
    onStart: () => void events.push('onStart'),
    onPause: () => void events.push('onPause'),
    onResume: () => void events.push('onResume'),
    onStop: () => void events.push('onStop'),
    health: () => ({ events }),
  },
  async handler(req, res) {
    const url = new URL(req.url ?? '/', 'http://app');
    if (url.pathname === '/') {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      return res.end(
        `Hello from ${process.env.APP_ID} (${process.env.APP_INSTANCE_ID}) ${process.env.AURA_LAYER_TAG ?? ''}\n`,
      );
    }
    if (url.pathname === '/env') {
      const path = {};
      for (const dir of (process.env.PATH ?? '').split(':')) {
        try {
          path[dir] = readdirSync(dir).sort();
        } catch {
          path[dir] = null;
        }
      }
      return json(res, 200, { env: process.env, path, cwd: process.cwd() });
    }
    if (url.pathname === '/which') {
      const name = url.searchParams.get('name') ?? '';
      if (!/^[a-z0-9][a-z0-9._+-]{0,63}$/.test(name))
        return json(res, 400, { error: 'name must be a plain command name' });
      const found = await run('/bin/sh', ['-c', 'command -v "$1"', 'sh', name]);
      const version = found ? await run(name, ['--version']) : null;
      return json(res, 200, { name, path: found || null, version: version?.split('\n')[0] ?? null });
    }
    return json(res, 404, { error: 'not found' });
  },
});

const host = process.env.AURA_LAYER_TAG === '[ctnr]' ? '0.0.0.0' : '127.0.0.1';
server.listen(Number(process.env.APP_PORT), host, () => {
  console.log(`hello-app ${process.env.APP_ID} listening on ${host}:${process.env.APP_PORT}`);
});
const stop = () => {
  console.log('hello-app: SIGTERM, closing');
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
