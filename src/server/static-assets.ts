// The inspector's files (plain HTML, JS and CSS next to this module; no build step), read once at start.
// They hold no data and no token, so they are the only thing served without the bearer token.
import { readFileSync } from 'node:fs';
import { SECURITY_HEADERS } from './http.ts';

export interface Asset {
  body: Buffer;
  headers: Record<string, string>;
}

/** Nothing external: scripts, styles and connections only to this origin. */
export const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const FILES: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/index.html': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/app.js': { file: 'app.js', type: 'text/javascript; charset=utf-8' },
  '/style.css': { file: 'style.css', type: 'text/css; charset=utf-8' },
  '/favicon.svg': { file: 'favicon.svg', type: 'image/svg+xml' },
};

export function loadAssets(dir: URL = new URL('./inspector/', import.meta.url)): Map<string, Asset> {
  const out = new Map<string, Asset>();
  for (const [path, { file, type }] of Object.entries(FILES)) {
    const body = readFileSync(new URL(file, dir));
    out.set(path, {
      body,
      headers: {
        ...SECURITY_HEADERS,
        'content-type': type,
        'content-length': String(body.length),
        'cache-control': 'no-cache',
        'content-security-policy': CONTENT_SECURITY_POLICY,
      },
    });
  }
  return out;
}
