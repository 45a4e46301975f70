// The codes the egress proxy answers with: its refusals (each in a connection report) and its control API's errors.
//
// They are codes of the one table (src/domain/error-codes.ts), listed again here only because the proxy runs under
// plain Node importing nothing but node: built-ins and the egress files (docs/decisions/0012); a type test and a
// unit test hold the two lists together (test/types/egress-codes.typecheck.ts, test/unit/egress/).

/** Why the proxy refused or cut a connection, or refused a DNS query. */
export const EGRESS_REFUSAL_CODES = [
  /** Not a CONNECT or an absolute-URI HTTP request the proxy can read. */
  'EGRESS_REQUEST_INVALID',
  /** A destination written as an IP address: only granted names are reachable. */
  'EGRESS_DIRECT_IP',
  /** A name the grant does not cover. */
  'EGRESS_HOST_NOT_GRANTED',
  /** A granted name on a port the grant does not list for it. */
  'EGRESS_PORT_NOT_GRANTED',
  /** The name did not resolve (or the resolver did not answer). */
  'EGRESS_RESOLVE_FAILED',
  /** The name resolved to an address in a forbidden range (loopback, private, metadata…) not in allowRanges. */
  'EGRESS_ADDRESS_FORBIDDEN',
  /** The connection arrived on an address that holds no grant. */
  'EGRESS_NO_GRANT',
  /** The execution's bytes (both ways, all connections) are spent. */
  'EGRESS_BYTES_EXCEEDED',
  /** The execution's network time is over. */
  'EGRESS_TIME_EXCEEDED',
  /** The execution has as many connections open as its grant allows. */
  'EGRESS_CONNECTIONS_EXCEEDED',
  /** A DNS query to the proxy: sandboxes resolve nothing themselves. */
  'EGRESS_DNS_REFUSED',
  /** The checked address did not accept the connection. */
  'EGRESS_UPSTREAM_FAILED',
] as const;

export type EgressRefusalCode = (typeof EGRESS_REFUSAL_CODES)[number];

/** The control API's error codes. */
export const EGRESS_CONTROL_CODES = [
  'EGRESS_GRANT_INVALID',
  'EGRESS_GRANT_EXISTS',
  'EGRESS_GRANT_UNKNOWN',
  'EGRESS_LISTEN_FAILED',
  'UNAUTHORIZED',
  'NOT_FOUND',
  'METHOD_NOT_ALLOWED',
  'PAYLOAD_TOO_LARGE',
  'INVALID_JSON',
  'INTERNAL',
] as const;

export type EgressControlCode = (typeof EGRESS_CONTROL_CODES)[number];
