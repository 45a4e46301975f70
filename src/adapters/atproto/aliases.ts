// Aliases: a mutable dev.mainasara.at-run.beta.v2.alias record whose `target` is a strong ref to one code
// record version. It is resolved freshly on every call (no cache) and followed exactly one hop: the target
// must be a code record, never another alias.

import { AT_RUN_V2, type StrongRef } from './collections.ts';
import { parseCid, type JsonObject } from './cid.ts';
import { AtprotoError } from './errors.ts';
import { fetchRecord, type FetchRecordOptions } from './records.ts';
import { parseRecordUri } from './syntax.ts';

export interface AliasRecord {
  $type: typeof AT_RUN_V2.alias;
  target: StrongRef;
  createdAt: string;
  description?: string;
}

export interface ResolvedAlias {
  /** The alias record version that was read. */
  alias: StrongRef;
  /** The code record version it points at. */
  target: StrongRef;
  description?: string;
}

export interface CodeUriResolution {
  /** The code record URI to fetch. */
  codeUri: string;
  /** The code record CID the alias pins (fetch with expectCid); absent for a direct code URI. */
  expectCid?: string;
  /** Present when `uri` was an alias. */
  via?: ResolvedAlias;
}

export type AliasOptions = Omit<FetchRecordOptions, 'expectCid'>;

/** Builds an alias record pointing at `target` (a code record strong ref). */
export function buildAliasRecord(
  target: StrongRef,
  opts: { createdAt?: string; description?: string } = {},
): AliasRecord {
  const rec: AliasRecord = {
    $type: AT_RUN_V2.alias,
    target: { uri: target.uri, cid: target.cid },
    createdAt: opts.createdAt ?? new Date().toISOString(),
    ...(opts.description !== undefined ? { description: opts.description } : {}),
  };
  // why: an AliasRecord is JSON by construction, but its interface has no index signature
  parseAliasRecord(rec as unknown as JsonObject, 'alias');
  return rec;
}

/** Validates an alias record value; throws ALIAS_INVALID listing every problem. */
export function parseAliasRecord(value: JsonObject, uri: string): { target: StrongRef; description?: string } {
  const issues: string[] = [];
  const t = value.target;
  let target: StrongRef | undefined;
  if (typeof t !== 'object' || t === null || Array.isArray(t)) issues.push('target: must be a strong ref {uri, cid}');
  else {
    const { uri: tu, cid: tc } = t;
    if (typeof tu !== 'string') issues.push('target.uri: must be a string');
    else {
      try {
        const p = parseRecordUri(tu);
        if (!p.did) issues.push('target.uri: must name the repo by DID, not handle');
        if (p.collection !== AT_RUN_V2.code)
          issues.push(
            `target.uri: must be a ${AT_RUN_V2.code} record (aliases are followed one hop), got ${p.collection}`,
          );
      } catch (err) {
        issues.push(`target.uri: ${(err as Error).message}`);
      }
    }
    if (typeof tc !== 'string') issues.push('target.cid: must be a string');
    else {
      try {
        const c = parseCid(tc);
        if (c.version !== 1 || c.code !== 0x71) issues.push('target.cid: must be a CIDv1 dag-cbor record CID');
      } catch {
        issues.push(`target.cid: ${JSON.stringify(tc)} is not a CID`);
      }
    }
    if (issues.length === 0 && typeof tu === 'string' && typeof tc === 'string') target = { uri: tu, cid: tc };
  }
  if (typeof value.createdAt !== 'string') issues.push('createdAt: must be a datetime string');
  if (value.description !== undefined && typeof value.description !== 'string')
    issues.push('description: must be a string');
  if (issues.length > 0 || !target) {
    throw new AtprotoError('ALIAS_INVALID', `alias ${uri} is invalid: ${issues.join('; ')}`, { uri, issues });
  }
  return { target, ...(typeof value.description === 'string' ? { description: value.description } : {}) };
}

/** Reads the alias record now (strict by default) and returns the code record version it points at. */
export async function resolveAlias(uri: string, opts: AliasOptions = {}): Promise<ResolvedAlias> {
  const parsed = parseRecordUri(uri);
  if (parsed.collection !== AT_RUN_V2.alias) {
    throw new AtprotoError('URI_WRONG_COLLECTION', `${uri} is not a ${AT_RUN_V2.alias} record`, {
      uri,
      collection: parsed.collection,
    });
  }
  const rec = await fetchRecord(uri, opts);
  const { target, description } = parseAliasRecord(rec.value, rec.uri);
  return { alias: { uri: rec.uri, cid: rec.cid }, target, ...(description !== undefined ? { description } : {}) };
}

/** A code URI is returned as is; an alias URI is resolved (one hop) to the code record it pins. */
export async function resolveCodeUri(uri: string, opts: AliasOptions = {}): Promise<CodeUriResolution> {
  const parsed = parseRecordUri(uri);
  if (parsed.collection === AT_RUN_V2.code) return { codeUri: uri };
  if (parsed.collection === AT_RUN_V2.alias) {
    const via = await resolveAlias(uri, opts);
    return { codeUri: via.target.uri, expectCid: via.target.cid, via };
  }
  throw new AtprotoError(
    'URI_WRONG_COLLECTION',
    `${uri} is neither a ${AT_RUN_V2.code} nor a ${AT_RUN_V2.alias} record`,
    { uri, collection: parsed.collection },
  );
}
