// Sortable ids: a ULID (48-bit time + 80 random bits, Crockford base32), prefixed by kind.
import { createHash, randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

export function ulid(now = Date.now()): string {
  let time = '';
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32]! + time;
    t = Math.floor(t / 32);
  }
  const bytes = randomBytes(16);
  let rand = '';
  for (let i = 0; i < 16; i++) rand += ALPHABET[bytes[i]! % 32];
  return time + rand;
}

export const newExecutionId = (): string => `exec_${ulid()}`;
export const newInstanceId = (): string => `inst_${ulid()}`;

/**
 * The execution id of a job record: the same for the same record version on every node and after every restart,
 * so recording its execution twice is refused by the log (a stream that already exists). 26 Crockford base32
 * characters of sha256(uri, cid), shaped like a ULID, though not ordered by time.
 */
export function jobExecutionId(uri: string, cid: string): string {
  const digest = createHash('sha256').update(`${uri}\n${cid}`).digest();
  let id = '';
  for (let i = 0; i < 26; i++) id += ALPHABET[digest[i]! % 32];
  return `exec_${id}`;
}
