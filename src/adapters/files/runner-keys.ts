// The runner's key ring: the X25519 key pairs secrets are sealed to, in <home>/runner-keys.json.
//
// The file is created 0600 on first use, written whole to a temporary file and moved into place (a first creation
// by link, so two processes starting at once cannot replace each other's key). It is refused, never repaired, when
// group or others have any access to it, when it is not the current user's, or when it is a link: its private keys
// could have been read, so the operator decides (chmod, then rotate). It is read again on every call, so a rotation
// by `runlog runner keys rotate` reaches a running supervisor without a restart. Two rotations at the same moment
// are not serialized (the later write wins whole): an operator runs one at a time.
// Private keys leave this file only as X25519PrivateKey objects, which never show their bytes (x25519-keys.ts);
// no error, list or log line carries them, and a JSON parse failure is reported without its text.

import { randomBytes } from 'node:crypto';
import {
  closeSync,
  fchmodSync,
  fsyncSync,
  linkSync,
  lstatSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  writeSync,
} from 'node:fs';
import { join } from 'node:path';
import { isDatetime } from '../../domain/at-run/record-syntax.ts';
import {
  RunnerKeysDamagedError,
  RunnerKeysInsecureError,
  SecretsKeyRetiredError,
  SecretsKeyUnknownError,
} from '../../domain/at-run/secrets-errors.ts';
import { exportX25519Secret, isX25519DidKey, X25519PrivateKey } from '../../domain/at-run/x25519-keys.ts';
import { ValidationError } from '../../domain/errors.ts';
import { ensurePrivateDirectory } from './local-files.ts';

export const RUNNER_KEYS_FILE = 'runner-keys.json';

/** A key of the ring, public data only. */
export interface RunnerKeyInfo {
  /** The X25519 public key as a did:key. */
  publicKey: string;
  createdAt: string;
  /** When set, the key opens secrets only before this time; the current key has none. */
  retiresAt?: string;
  /** The key new secrets are sealed to (the newest). */
  current: boolean;
}

export interface RunnerKeyRing {
  readonly file: string;
  /** The current key (the ring is created with one on first use). */
  current(): RunnerKeyInfo;
  /** Every key still in the file, oldest first, public data only. */
  list(): RunnerKeyInfo[];
  /**
   * Adds a new current key; the previous one keeps opening secrets until `retireOldAt` (required, in the future).
   * Keys already past their retire date are dropped from the file.
   */
  rotate(opts: { retireOldAt: string; now?: Date }): { current: RunnerKeyInfo; retiring: RunnerKeyInfo };
  /** The private key for a public key, or SECRETS_KEY_UNKNOWN / SECRETS_KEY_RETIRED. */
  forDecryption(publicKey: string, now: Date): X25519PrivateKey;
}

interface StoredKey {
  publicKey: string;
  privateKey: string;
  createdAt: string;
  retiresAt?: string;
}

const myUid = (): number | null => (typeof process.getuid === 'function' ? process.getuid() : null);

function checkFile(file: string): boolean {
  let st;
  try {
    st = lstatSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  if (st.isSymbolicLink()) throw new RunnerKeysInsecureError(file, 'it is a symbolic link');
  if (!st.isFile()) throw new RunnerKeysInsecureError(file, 'it is not a regular file');
  const uid = myUid();
  if (uid !== null && st.uid !== uid)
    throw new RunnerKeysInsecureError(file, `it is owned by uid ${st.uid}, not ${uid}`);
  const mode = st.mode & 0o777;
  if ((mode & 0o077) !== 0)
    throw new RunnerKeysInsecureError(file, `group or others have access to it (mode 0${mode.toString(8)})`);
  return true;
}

function parseRing(file: string, text: string): StoredKey[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new RunnerKeysDamagedError(file, 'it is not JSON'); // the parser's message would quote the file
  }
  const keys = (doc as { version?: unknown; keys?: unknown } | null)?.keys;
  if ((doc as { version?: unknown } | null)?.version !== 1 || !Array.isArray(keys) || keys.length === 0)
    throw new RunnerKeysDamagedError(file, 'it is not a version 1 key ring with at least one key');
  keys.forEach((k: Partial<StoredKey> | null, i) => {
    const bad = (what: string) => new RunnerKeysDamagedError(file, `keys[${i}]: ${what}`);
    if (typeof k !== 'object' || k === null) throw bad('not an object');
    if (!isX25519DidKey(k.publicKey)) throw bad('publicKey is not an X25519 did:key');
    if (!isDatetime(k.createdAt)) throw bad('createdAt is not a datetime');
    if (k.retiresAt !== undefined && !isDatetime(k.retiresAt)) throw bad('retiresAt is not a datetime');
    const secret = typeof k.privateKey === 'string' ? Buffer.from(k.privateKey, 'base64') : null;
    const matches = secret?.length === 32 && X25519PrivateKey.fromBytes(secret).publicKey === k.publicKey;
    secret?.fill(0);
    if (!matches) throw bad('privateKey is not the 32-byte key of publicKey');
  });
  if ((keys[keys.length - 1] as StoredKey).retiresAt !== undefined)
    throw new RunnerKeysDamagedError(file, 'the newest key has a retire date');
  return keys as StoredKey[];
}

/** Writes the whole ring 0600 next to `file`, then moves it into place (or links it, refusing to replace one). */
function writeRing(file: string, keys: readonly StoredKey[], create: boolean): void {
  const tmp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    fchmodSync(fd, 0o600); // the umask only removes bits; make the mode exact anyway
    writeSync(fd, `${JSON.stringify({ version: 1, keys }, null, 2)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    if (create) linkSync(tmp, file);
    else renameSync(tmp, file);
  } finally {
    rmSync(tmp, { force: true });
  }
}

function newKey(now: Date): StoredKey {
  const key = X25519PrivateKey.generate();
  return {
    publicKey: key.publicKey,
    privateKey: Buffer.from(exportX25519Secret(key)).toString('base64'),
    createdAt: now.toISOString(),
  };
}

const info = (k: StoredKey, i: number, all: readonly StoredKey[]): RunnerKeyInfo => ({
  publicKey: k.publicKey,
  createdAt: k.createdAt,
  ...(k.retiresAt !== undefined ? { retiresAt: k.retiresAt } : {}),
  current: i === all.length - 1,
});

/** The key ring in `home` (created with one key on first use). */
export function openRunnerKeyRing(home: string): RunnerKeyRing {
  const file = join(home, RUNNER_KEYS_FILE);
  const read = (): StoredKey[] => {
    if (!checkFile(file)) {
      ensurePrivateDirectory(home);
      try {
        writeRing(file, [newKey(new Date())], true);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err; // another process created it first
      }
      checkFile(file);
    }
    return parseRing(file, readFileSync(file, 'utf8'));
  };
  const list = () => read().map(info);
  return {
    file,
    list,
    current: () => list().at(-1)!,
    rotate({ retireOldAt, now = new Date() }) {
      const at = Date.parse(retireOldAt);
      if (!isDatetime(retireOldAt) || at <= now.getTime())
        throw new ValidationError('KEY_RETIRE_INVALID', 'the old key needs a retire date in the future', [
          `${JSON.stringify(retireOldAt.slice(0, 64))} is not an RFC 3339 datetime after ${now.toISOString()}`,
        ]);
      const kept = read().filter((k) => k.retiresAt === undefined || Date.parse(k.retiresAt) > now.getTime());
      const old = kept[kept.length - 1]!;
      kept[kept.length - 1] = { ...old, retiresAt: new Date(at).toISOString() };
      const keys = [...kept, newKey(now)];
      writeRing(file, keys, false);
      return {
        current: info(keys.at(-1)!, keys.length - 1, keys),
        retiring: info(keys.at(-2)!, keys.length - 2, keys),
      };
    },
    forDecryption(publicKey, now) {
      const k = read().find((x) => x.publicKey === publicKey);
      if (!k) throw new SecretsKeyUnknownError(publicKey);
      if (k.retiresAt !== undefined && Date.parse(k.retiresAt) <= now.getTime())
        throw new SecretsKeyRetiredError(publicKey, k.retiresAt);
      const secret = Buffer.from(k.privateKey, 'base64');
      try {
        return X25519PrivateKey.fromBytes(secret); // it keeps a copy of its own
      } finally {
        secret.fill(0);
      }
    },
  };
}
