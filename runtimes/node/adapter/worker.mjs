// at-run worker protocol v1 — the Node.js language adapter.
//
// Launched by the runner as `/opt/at-run/runtime/bin/node /opt/at-run/runtime/adapter/worker.mjs <entrypoint>`.
// 1. reads ONE newline-terminated JSON envelope from stdin:
//      {version:1, id, type:'invoke', code:{uri,cid}, handler, input, context:{callerDid, deadline, secrets?}}
// 2. imports the code entrypoint and calls its exported `handler(input, context)` (sync or async);
//    context.secrets is the job's opened secrets by name, a frozen object, empty when the execution has none;
//    the adapter never prints or echoes them (they arrive on stdin only, never in argv or env);
// 3. writes NDJSON frames to stdout: optional {type:'log'|'progress', id, ...}, then exactly one terminal
//    {type:'result', id, output} or {type:'error', id, error:{code, message}}; then exits.
// stdout belongs to the protocol: console.* and process.stdout.write of user code are redirected to stderr.
import { pathToFileURL } from 'node:url';
import { isAbsolute } from 'node:path';

const PROTOCOL_VERSION = 1;
const MAX_ENVELOPE_BYTES = 8 * 1024 * 1024;
const HANDLER_NAME = /^[A-Za-z_$][A-Za-z0-9_$]{0,127}$/;

// --- stdout is the protocol channel; everything else goes to stderr --------------------------------------
const protocolOut = process.stdout; // a pipe under Docker: writes are synchronous on Linux
const writeProtocol = protocolOut.write.bind(protocolOut);
const toStderr = process.stderr.write.bind(process.stderr);
protocolOut.write = (...args) => toStderr(...args);
globalThis.console = new console.Console({ stdout: process.stderr, stderr: process.stderr });
try {
  Object.defineProperty(process, 'stdout', { configurable: true, enumerable: true, get: () => process.stderr });
} catch {
  // the write redirection above still holds
}

let invocationId = null;
let terminal = false;

function frame(obj) {
  writeProtocol(JSON.stringify(obj) + '\n');
}

function finish(obj, exitCode) {
  if (terminal) return;
  terminal = true;
  // Pipes are written synchronously on Linux; the callback orders the exit after the data is handed off.
  writeProtocol(JSON.stringify(obj) + '\n', () => process.exit(exitCode));
}

function fail(code, message) {
  finish({ type: 'error', id: invocationId, error: { code, message: String(message).slice(0, 64 * 1024) } }, 1);
}

function errorCode(err) {
  if (err && typeof err === 'object' && typeof err.code === 'string' && err.code.length > 0 && err.code.length <= 128) {
    return err.code;
  }
  return 'HANDLER_ERROR';
}

function errorMessage(err) {
  if (err instanceof Error) return err.message;
  try {
    return typeof err === 'string' ? err : JSON.stringify(err) ?? String(err);
  } catch {
    return String(err);
  }
}

process.on('uncaughtException', (err) => fail('UNCAUGHT_EXCEPTION', errorMessage(err)));
process.on('unhandledRejection', (err) => fail('UNHANDLED_REJECTION', errorMessage(err)));

function readEnvelopeLine() {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    const done = (fn, value) => {
      process.stdin.off('data', onData);
      process.stdin.off('end', onEnd);
      process.stdin.off('error', onError);
      process.stdin.pause();
      process.stdin.destroy();
      fn(value);
    };
    const onData = (chunk) => {
      const nl = chunk.indexOf(0x0a);
      const part = nl === -1 ? chunk : chunk.subarray(0, nl);
      size += part.length;
      if (size > MAX_ENVELOPE_BYTES) return done(reject, Object.assign(new Error(`envelope exceeds ${MAX_ENVELOPE_BYTES} bytes`), { code: 'ENVELOPE_TOO_LARGE' }));
      chunks.push(part);
      if (nl !== -1) done(resolve, Buffer.concat(chunks).toString('utf8'));
    };
    const onEnd = () => done(resolve, Buffer.concat(chunks).toString('utf8'));
    const onError = (err) => done(reject, err);
    process.stdin.on('data', onData);
    process.stdin.on('end', onEnd);
    process.stdin.on('error', onError);
  });
}

function checkEnvelope(env) {
  const problems = [];
  if (env === null || typeof env !== 'object' || Array.isArray(env)) return ['envelope is not a JSON object'];
  if (env.version !== PROTOCOL_VERSION) problems.push(`unsupported protocol version ${JSON.stringify(env.version)}`);
  if (env.type !== 'invoke') problems.push(`unsupported envelope type ${JSON.stringify(env.type)}`);
  if (typeof env.id !== 'string' || env.id.length === 0) problems.push('id must be a non-empty string');
  if (typeof env.handler !== 'string' || !HANDLER_NAME.test(env.handler)) problems.push('handler must be an identifier');
  if (!env.code || typeof env.code.uri !== 'string' || typeof env.code.cid !== 'string') problems.push('code must be {uri, cid}');
  if (!env.context || typeof env.context !== 'object') problems.push('context must be an object');
  else if (env.context.secrets !== undefined && !isSecrets(env.context.secrets))
    problems.push('context.secrets must be an object of strings'); // never the values: only their shape
  return problems;
}

function isSecrets(s) {
  return s !== null && typeof s === 'object' && !Array.isArray(s) && Object.values(s).every((v) => typeof v === 'string');
}

async function main() {
  const entrypoint = process.argv[2];
  if (!entrypoint || !isAbsolute(entrypoint)) return fail('BAD_LAUNCH', 'the adapter needs the absolute entrypoint path as its only argument');

  let line;
  try {
    line = await readEnvelopeLine();
  } catch (err) {
    return fail(errorCode(err) === 'HANDLER_ERROR' ? 'BAD_ENVELOPE' : errorCode(err), errorMessage(err));
  }
  let env;
  try {
    env = JSON.parse(line);
  } catch (err) {
    return fail('BAD_ENVELOPE', `envelope is not JSON: ${errorMessage(err)}`);
  }
  if (env && typeof env.id === 'string') invocationId = env.id;
  const problems = checkEnvelope(env);
  if (problems.length > 0) return fail('BAD_ENVELOPE', problems.join('; '));

  let mod;
  try {
    mod = await import(pathToFileURL(entrypoint).href);
  } catch (err) {
    return fail('ENTRYPOINT_LOAD_FAILED', `could not load the code entrypoint: ${errorMessage(err)}`);
  }
  const own = (o, k) => o !== null && (typeof o === 'object' || typeof o === 'function') && Object.prototype.hasOwnProperty.call(o, k);
  let fn = own(mod, env.handler) ? mod[env.handler] : undefined;
  if (typeof fn !== 'function' && own(mod, 'default') && own(mod.default, env.handler)) fn = mod.default[env.handler];
  if (typeof fn !== 'function') return fail('HANDLER_NOT_FOUND', `the entrypoint exports no function named ${env.handler}`);

  const context = Object.freeze({
    id: env.id,
    invocationId: env.id,
    callerDid: env.context.callerDid ?? null,
    deadline: env.context.deadline ?? null,
    secrets: Object.freeze({ ...(env.context.secrets ?? {}) }),
    code: Object.freeze({ uri: env.code.uri, cid: env.code.cid }),
    log: (...args) => {
      if (terminal) return;
      const message = args.map((a) => (typeof a === 'string' ? a : errorMessage(a))).join(' ');
      frame({ type: 'log', id: env.id, level: 'info', message });
    },
    progress: (value, message) => {
      if (terminal) return;
      frame({ type: 'progress', id: env.id, progress: value, ...(message === undefined ? {} : { message: String(message) }) });
    },
  });

  let output;
  try {
    output = await fn(env.input, context);
  } catch (err) {
    return fail(errorCode(err), errorMessage(err));
  }
  let serialized;
  try {
    serialized = JSON.stringify({ type: 'result', id: env.id, output: output === undefined ? null : output });
  } catch (err) {
    return fail('OUTPUT_NOT_SERIALIZABLE', errorMessage(err));
  }
  if (terminal) return;
  terminal = true;
  writeProtocol(serialized + '\n', () => process.exit(0));
}

main().catch((err) => fail('ADAPTER_ERROR', errorMessage(err)));
