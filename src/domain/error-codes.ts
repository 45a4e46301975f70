// Every code runlog throws, each with its category; the CLI's exit status and the API's HTTP status are both
// derived from the category, here and nowhere else (src/cli/output.ts and src/server/http.ts only look up).
// A code missing from this table is a compile error wherever it is thrown (RunlogError takes an ErrorCode).

/** Exit statuses, stable for scripts (README, "The CLI"). */
export const EXIT = { ok: 0, failure: 1, usage: 2, noSupervisor: 3, damagedLog: 4, conflict: 5 } as const;
export type ExitStatus = (typeof EXIT)[keyof typeof EXIT];

/** What kind of trouble a code is: what a caller can do about it. */
export const CATEGORIES = {
  /** The command line, a request or a record is wrong: fix the input. */
  validation: { exit: EXIT.usage, http: 400 },
  /** The input is larger than a limit allows. */
  'too-large': { exit: EXIT.usage, http: 413 },
  /** The request body is not JSON (HTTP only). */
  'media-type': { exit: EXIT.usage, http: 415 },
  /** The endpoint exists, the method does not (HTTP only). */
  'method-not-allowed': { exit: EXIT.usage, http: 405 },
  /** No such actor, endpoint, record or container. */
  'not-found': { exit: EXIT.failure, http: 404 },
  /** The actor's state (or a concurrent writer) does not allow it: nothing was changed. */
  conflict: { exit: EXIT.conflict, http: 409 },
  /** The log (or a history file) is damaged, foreign or too new: left untouched. */
  damaged: { exit: EXIT.damagedLog, http: 500 },
  /** No `runlog serve` runs for this home: start one. */
  'no-supervisor': { exit: EXIT.noSupervisor, http: 503 },
  /**
   * A part runlog needs is missing, does not answer or is busy (Docker, the PDS, the store, the embedded PDS's
   * package, a closing host): install or start it (`npm run setup`), or retry later.
   */
  unavailable: { exit: EXIT.failure, http: 503 },
  /** A deadline passed. */
  timeout: { exit: EXIT.failure, http: 504 },
  /** Not supported here (by this sandbox, platform or build). */
  unsupported: { exit: EXIT.failure, http: 501 },
  /** The API token is missing or wrong. */
  unauthorized: { exit: EXIT.failure, http: 401 },
  /** Refused for safety (a file or a host that cannot be trusted). */
  forbidden: { exit: EXIT.failure, http: 403 },
  /** Something failed that is neither the caller's input nor a part being down (or a bug): see the message. */
  internal: { exit: EXIT.failure, http: 500 },
} as const satisfies Record<string, { exit: ExitStatus; http: number }>;

export type ErrorCategory = keyof typeof CATEGORIES;

/** The table: code → category. Keep it sorted by category, then by name. */
export const ERROR_CODES = {
  // validation
  ALIAS_INVALID: 'validation',
  APP_DIR_MISSING: 'validation',
  APP_ID_INVALID: 'validation',
  APPS_DIR_MISSING: 'validation',
  ARCHIVE_EXISTS: 'validation',
  ARCHIVE_OPTIONS_INVALID: 'validation',
  ARCHIVE_REJECTED: 'validation',
  ARCHIVE_WRITE_INVALID: 'validation',
  AT_URI_INVALID: 'validation',
  BLOB_CID_MISMATCH: 'validation',
  BLOB_MIME_TYPE_CHANGED: 'validation',
  CALLER_DID_INVALID: 'validation',
  CAP_TAKES_APP_ID: 'validation',
  CID_INVALID: 'validation',
  CODE_ADDITION_NOT_DIGEST: 'validation',
  CODE_ARCHIVE_INVALID: 'validation',
  CODE_BLOB_INVALID: 'validation',
  CODE_DIR_INVALID: 'validation',
  CODE_ENTRYPOINT_INVALID: 'validation',
  CODE_HANDLERS_INVALID: 'validation',
  CODE_MIME_MISMATCH: 'validation',
  CODE_RECORD_INVALID: 'validation',
  CODE_REQUESTED_INVALID: 'validation',
  CODE_RUNTIME_REF_INVALID: 'validation',
  DATA_MODEL_INVALID: 'validation',
  DEADLINE_INVALID: 'validation',
  DID_CACHE_CONFIG_INVALID: 'validation',
  DID_INVALID: 'validation',
  /** A grant the egress proxy's control API cannot read (docs/decisions/0012). */
  EGRESS_GRANT_INVALID: 'validation',
  /** Sent to the egress proxy: not a CONNECT or an absolute-URI HTTP request it can read. */
  EGRESS_REQUEST_INVALID: 'validation',
  ENCRYPTION_KEY_INVALID: 'validation',
  ENTRYPOINT_MISSING: 'validation',
  ENVELOPE_MISMATCH: 'validation',
  EXECUTE_INVALID: 'validation',
  HANDLE_INVALID: 'validation',
  HANDLER_INVALID: 'validation',
  HANDLER_NOT_FOUND: 'validation',
  IMAGE_REF_INVALID: 'validation',
  INPUT_INVALID: 'validation',
  INVALID_JSON: 'validation',
  INVALID_REQUEST: 'validation',
  JOB_CODE_REF_INVALID: 'validation',
  JOB_RECORD_INVALID: 'validation',
  /**
   * A job whose resultKey is not an X25519 public key as a did:key, or is a low-order point: nothing can be sealed
   * to it.
   */
  JOB_RESULT_KEY_INVALID: 'validation',
  JOB_SECRETS_REF_INVALID: 'validation',
  /** A job record that is not what the stream named, or not signed by its repo's key: a forged job. */
  JOB_UNVERIFIED: 'validation',
  KEY_RETIRE_INVALID: 'validation',
  LIMIT_EXCEEDS_POLICY: 'validation',
  LIMIT_INVALID: 'validation',
  MANIFEST_INVALID: 'validation',
  MANIFEST_MISSING: 'validation',
  /** The hosts a code record names meet none of the policy's network destinations. */
  NETWORK_GRANT_EMPTY: 'validation',
  NETWORK_NOT_ALLOWED: 'validation',
  NODE_INVALID: 'validation',
  NODE_WAIT_INVALID: 'validation',
  OPERATOR_POLICY_INVALID: 'validation',
  OPTIONS_INVALID: 'validation',
  PLATFORM_NOT_ACCEPTED: 'validation',
  PORT_RANGE_INVALID: 'validation',
  PUBLISHER_NOT_ALLOWED: 'validation',
  RECORD_CID_MISMATCH: 'validation',
  RECORD_FIELDS_INVALID: 'validation',
  RECORD_INVALID: 'validation',
  RECORD_PROOF_INVALID: 'validation',
  RECORD_SIGNATURE_INVALID: 'validation',
  REGISTRY_NOT_ALLOWED: 'validation',
  REPLAY_TO_INVALID: 'validation',
  /** A job's result blob whose bytes do not hash to its receipt's outputSha256. */
  RESULT_HASH_MISMATCH: 'validation',
  /**
   * A job's sealed result that does not open with the caller's key (sealed to another key or for another job,
   * altered, malformed), or a result in clear when the job asked for it sealed.
   */
  RESULT_UNSEALABLE: 'validation',
  RUNNER_ENCRYPTION_KEY_MISSING: 'validation',
  RUNTIME_ARGS_ENTRYPOINT: 'validation',
  RUNTIME_ARGS_SHELL_SYNTAX: 'validation',
  RUNTIME_BINDING_MISMATCH: 'validation',
  RUNTIME_ENV_INVALID: 'validation',
  RUNTIME_EXPORT_PATH_INVALID: 'validation',
  RUNTIME_IMAGE_NOT_DIGEST: 'validation',
  RUNTIME_KIND_UNSUPPORTED: 'validation',
  RUNTIME_LAUNCHER_INVALID: 'validation',
  RUNTIME_PLATFORM_DUPLICATE: 'validation',
  RUNTIME_PLATFORM_MISSING: 'validation',
  RUNTIME_PROTOCOL_UNSUPPORTED: 'validation',
  RUNTIME_RECORD_INVALID: 'validation',
  RUNTIME_TEMPLATE_MISSING: 'validation',
  SANDBOX_COMMAND_INVALID: 'validation',
  SANDBOX_SPEC_INVALID: 'validation',
  SANDBOX_VOLUME_MISSING: 'validation',
  SECRETS_CODE_MISMATCH: 'validation',
  SECRETS_INPUT_INVALID: 'validation',
  SECRETS_KEY_RETIRED: 'validation',
  SECRETS_KEY_UNKNOWN: 'validation',
  SECRETS_NOT_CALLERS: 'validation',
  SECRETS_RECORD_INVALID: 'validation',
  SECRETS_RUNNER_MISMATCH: 'validation',
  SECRETS_TAMPERED: 'validation',
  SPAWN_INVALID: 'validation',
  STORE_INPUT: 'validation',
  STORE_PROJECTIONS: 'validation',
  TIMEOUT_INVALID: 'validation',
  TOOL_UNKNOWN: 'validation',
  URI_WRONG_COLLECTION: 'validation',
  USAGE: 'validation',
  WRONG_KIND: 'validation',
  // too-large
  BLOB_TOO_LARGE: 'too-large',
  /** An execution's network bytes (both ways, all connections) are spent: the proxy cut or refused it. */
  EGRESS_BYTES_EXCEEDED: 'too-large',
  ENVELOPE_TOO_LARGE: 'too-large',
  INPUT_TOO_LARGE: 'too-large',
  PAYLOAD_TOO_LARGE: 'too-large',
  RECORD_TOO_LARGE: 'too-large',
  // HTTP only
  UNSUPPORTED_MEDIA_TYPE: 'media-type',
  METHOD_NOT_ALLOWED: 'method-not-allowed',
  // not-found
  BLOB_NOT_FOUND: 'not-found',
  CONTAINER_NOT_FOUND: 'not-found',
  DOCKER_NOT_FOUND: 'not-found',
  /** The egress proxy holds no grant under that key. */
  EGRESS_GRANT_UNKNOWN: 'not-found',
  EXPORT_PATH_NOT_FOUND: 'not-found',
  IMAGE_NOT_FOUND: 'not-found',
  INSTANCE_UNKNOWN: 'not-found',
  LOG_MISSING: 'not-found',
  NO_METRICS: 'not-found',
  NODE_UNKNOWN: 'not-found',
  NOT_FOUND: 'not-found',
  RECORD_NOT_FOUND: 'not-found',
  /** A receipt that says a job succeeded but references no result blob. */
  RESULT_MISSING: 'not-found',
  STORE_UNKNOWN_PROJECTION: 'not-found',
  // conflict
  ACTOR_EXISTS: 'conflict',
  ARCHIVE_BUSY: 'conflict',
  ARCHIVE_CONFLICT: 'conflict',
  CONCURRENCY: 'conflict',
  CONTAINER_ALREADY_STARTED: 'conflict',
  CONTAINER_NOT_STARTED: 'conflict',
  DOCKER_CONFLICT: 'conflict',
  /** The egress proxy holds a grant under that key, or on that address, already. */
  EGRESS_GRANT_EXISTS: 'conflict',
  FENCED: 'conflict',
  ILLEGAL_EVENT: 'conflict',
  INSTANCE_BUSY: 'conflict',
  NOT_A_FACT_STREAM: 'conflict',
  PORT_CONFLICT: 'conflict',
  PRESTARTED_NOT_RUNNING: 'conflict',
  READ_ONLY: 'conflict',
  // damaged
  HISTORY_INVALID: 'damaged',
  REPLAY: 'damaged',
  RUNNER_KEYS_DAMAGED: 'damaged',
  STORE_CHAIN_BROKEN: 'damaged',
  STORE_CORRUPT: 'damaged',
  STORE_EMPTY: 'damaged',
  STORE_FOREIGN: 'damaged',
  STORE_TOO_NEW: 'damaged',
  STORE_TRUNCATED: 'damaged',
  STORE_WAL_DAMAGED: 'damaged',
  STORE_WAL_LOST: 'damaged',
  // no-supervisor
  NO_SUPERVISOR: 'no-supervisor',
  // unavailable
  DEV_ENV_MISSING: 'unavailable',
  DOCKER_UNAVAILABLE: 'unavailable',
  /** An execution has as many connections open through the egress proxy as its grant allows. */
  EGRESS_CONNECTIONS_EXCEEDED: 'unavailable',
  /** The egress proxy could not listen on a grant's address (not one of its own yet). */
  EGRESS_LISTEN_FAILED: 'unavailable',
  /** A granted name the egress proxy's resolver did not resolve. */
  EGRESS_RESOLVE_FAILED: 'unavailable',
  /** The address the egress proxy checked did not accept its connection. */
  EGRESS_UPSTREAM_FAILED: 'unavailable',
  EXECUTION_QUEUE_FULL: 'unavailable',
  FOLLOW_LOST: 'unavailable',
  HOST_CLOSED: 'unavailable',
  JOB_RATE_LIMITED: 'unavailable',
  /** A job record whose author's PDS or DID document could not be read in time. */
  JOB_UNREADABLE: 'unavailable',
  NODE_UNAVAILABLE: 'unavailable',
  HANDOVER_FAILED: 'unavailable',
  PDS_UNREACHABLE: 'unavailable',
  PORTS_EXHAUSTED: 'unavailable',
  REPO_STREAM_ERROR: 'unavailable',
  REPO_STREAM_UNAVAILABLE: 'unavailable',
  SETUP_MISSING: 'unavailable',
  STORE_BUSY: 'unavailable',
  STORE_CLOSED: 'unavailable',
  STORE_UNAVAILABLE: 'unavailable',
  SUPERVISOR_RUNNING: 'unavailable',
  TOO_MANY_STREAMS: 'unavailable',
  // timeout
  DEADLINE_PASSED: 'timeout',
  DOCKER_TIMEOUT: 'timeout',
  /** An execution's network time is over: the egress proxy cut or refused it. */
  EGRESS_TIME_EXCEEDED: 'timeout',
  EXECUTION_QUEUE_TIMEOUT: 'timeout',
  HEALTH_TIMEOUT: 'timeout',
  JOB_EXPIRED: 'timeout',
  NETWORK_TIMEOUT: 'timeout',
  PLACEMENT_TIMEOUT: 'timeout',
  HANDOVER_TIMEOUT: 'timeout',
  TIMEOUT: 'timeout',
  // unsupported
  ADOPT_UNSUPPORTED: 'unsupported',
  APP_COPY_UNSUPPORTED: 'unsupported',
  NOT_SUPPORTED: 'unsupported',
  // unauthorized / forbidden
  UNAUTHORIZED: 'unauthorized',
  DID_WEB_HOST_REFUSED: 'forbidden',
  /** A granted name resolved into a forbidden range (loopback, private, link-local, metadata…) not in allowRanges. */
  EGRESS_ADDRESS_FORBIDDEN: 'forbidden',
  /** A destination written as an IP address: executions reach granted names only. */
  EGRESS_DIRECT_IP: 'forbidden',
  /** A DNS query to the egress proxy: sandboxes resolve nothing themselves. */
  EGRESS_DNS_REFUSED: 'forbidden',
  /** A name the execution's grant does not cover. */
  EGRESS_HOST_NOT_GRANTED: 'forbidden',
  /** A connection on an egress proxy address that holds no grant. */
  EGRESS_NO_GRANT: 'forbidden',
  /** A granted name on a port its grant does not list. */
  EGRESS_PORT_NOT_GRANTED: 'forbidden',
  FORBIDDEN_HOST: 'forbidden',
  HOME_INSECURE: 'forbidden',
  PERMISSION_DENIED: 'forbidden',
  RUNNER_KEYS_INSECURE: 'forbidden',
  SERVER_INFO_UNTRUSTED: 'forbidden',
  TOKEN_INVALID: 'forbidden',
  // internal
  API_ERROR: 'internal',
  APP_COPY_LOOP: 'internal',
  APPEND_FAILED: 'internal',
  ARCHIVE_STREAM_ABANDONED: 'internal',
  BAD_RESPONSE: 'internal',
  DID_RESOLUTION_FAILED: 'internal',
  DOCKER_API: 'internal',
  EVENT_NOT_ENCODABLE: 'internal',
  EXITED_BEFORE_HEALTHY: 'internal',
  EXPORT_PATH_NOT_DIRECTORY: 'internal',
  EXPORT_TOO_LARGE: 'internal',
  HANDLE_RESOLUTION_FAILED: 'internal',
  HEALTH_MISMATCH: 'internal',
  IMAGE_PULL_FAILED: 'internal',
  IMAGE_TOO_LARGE: 'internal',
  INTERNAL: 'internal',
  LIFECYCLE_FAILED: 'internal',
  LISTEN_FAILED: 'internal',
  LOCK_FAILED: 'internal',
  LOG_UNREADABLE: 'internal',
  MATERIALIZATION_FAILED: 'internal',
  PROJECTION_FAILED: 'internal',
  PUBLISH_AUTH_FAILED: 'internal',
  PUBLISH_FAILED: 'internal',
  REPO_STREAM_FRAME_INVALID: 'internal',
  SPAWN_FAILED: 'internal',
  STORE_NOT_DURABLE: 'internal',
  STORE_PROJECTION: 'internal',
  STORE_WRITE: 'internal',
  UNKNOWN_EFFECT: 'internal',
} as const satisfies Record<string, ErrorCategory>;

/**
 * A code of the table above. The `& string` changes no member (every key is a string); it makes TypeScript keep the
 * name, so declarations, editors and the library reference say `ErrorCode` rather than listing every code.
 */
export type ErrorCode = keyof typeof ERROR_CODES & string;
/** The codes of one category, e.g. `CodeOf<'validation'>`. */
export type CodeOf<C extends ErrorCategory> = {
  [K in ErrorCode]: (typeof ERROR_CODES)[K] extends C ? K : never;
}[ErrorCode];

export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERROR_CODES, code);
}

export function categoryOf(code: ErrorCode): ErrorCategory {
  return ERROR_CODES[code];
}

/** The CLI's exit status for a code. */
export function exitStatusOf(code: ErrorCode): ExitStatus {
  return CATEGORIES[ERROR_CODES[code]].exit;
}

/** The API's HTTP status for a code. */
export function httpStatusOf(code: ErrorCode): number {
  return CATEGORIES[ERROR_CODES[code]].http;
}
