// The resolve effect of an execution: 1–6 of the seed's PDS-first flow, URI → DID → PDS → code record → runtime
// record → platform. It owns what makes a burst's resolutions cheap (shared reads, hints of what a URI named last
// time, the daemon's platform asked once), and every read it uses is still verified during this execution.
import {
  isAtprotoError,
  type AtprotoReader,
  type CodeUriResolution,
  type FetchedRecord,
} from '../../adapters/atproto/index.ts';
import type { DockerEngine } from '../../adapters/docker/docker-port.ts';
import { assertCodeRecord, checkRuntimeBinding, type CodeRecord } from '../../domain/at-run/code-record.ts';
import type { OperatorPolicy } from '../../domain/at-run/operator-policy.ts';
import { admitCode, admitRuntime } from '../../domain/at-run/policy-admission.ts';
import { selectRuntimePlatform } from '../../domain/at-run/runtime-record.ts';
import { ValidationError } from '../../domain/errors.ts';
import type { Resolved } from '../../domain/execution-events.ts';
import type { ExecutionContext, ExecutionRequest } from '../../machines/execution.machine.ts';
import { codeKey, type CodePreparation } from './code-preparation.ts';
import { classify } from './execution-outcomes.ts';
import type { LatencyProfiles } from './execution-profiles.ts';
import type { ExecutionEffectContext, ExecutionProgress } from './execution-progress.ts';
import { FreshFlight } from './fresh-flight.ts';
import { checkEnvelope } from './invocation-envelope.ts';
import { checkedSecrets, type JobSecrets } from './job-secrets.ts';
import type { PrestartGate } from './pool/prestart-gate.ts';
import type { PoolTarget } from './pool/sandbox-pool.ts';
import { ResolutionHints } from './resolution-hints.ts';

/** A shared read that ran out of its starter's time: a joiner with more time reads again (fresh-flight.ts). */
const isNetworkTimeout = (err: unknown): boolean => isAtprotoError(err) && err.code === 'NETWORK_TIMEOUT';

type Platform = { os: string; architecture: string; variant?: string };

export interface ResolverDeps {
  policy: OperatorPolicy;
  reader: AtprotoReader;
  /** The Docker Engine port, asked for on first use (its platform is what the runtime record is chosen for). */
  engine: () => DockerEngine;
  code: CodePreparation;
  gate: PrestartGate<PoolTarget>;
  profiles: LatencyProfiles;
  progress: ExecutionProgress;
  /** A job's sealed secrets: opened here only to check them (job-secrets.ts). */
  secrets: JobSecrets;
  nowMs: () => number;
}

export class ExecutionResolver {
  private readonly hints = new ResolutionHints();
  /** Reads of a burst's executions shared while in flight, never across a submission (fresh-flight.ts). */
  private readonly records: FreshFlight<FetchedRecord>;
  private readonly codeUris: FreshFlight<CodeUriResolution>;
  private platformOnce: Promise<Platform> | null = null;

  constructor(private readonly deps: ResolverDeps) {
    this.records = new FreshFlight<FetchedRecord>({ retryable: isNetworkTimeout, nowMs: () => deps.nowMs() });
    this.codeUris = new FreshFlight<CodeUriResolution>({
      retryable: isNetworkTimeout,
      nowMs: () => deps.nowMs(),
    });
  }

  // 1–6 of the seed's PDS-first flow: URI → DID → PDS → code record → runtime record → platform.
  // The runtime record and the code blob depend on the code record, but what it named last time (a hint) is
  // read alongside it; a hint is used only when this execution's verified code record names the same thing.
  async resolve(request: ExecutionRequest, ctx: ExecutionEffectContext): Promise<void> {
    const { policy, reader, code: codePrep, profiles } = this.deps;
    const id = ctx.actor.id;
    const t0 = performance.now();
    this.deps.gate.begin(id);
    let resolved: Resolved;
    // Every network read of the resolution ends within the caller's timeout, counted from the request: a slow
    // PDS spends the execution's time, never more (NETWORK_TIMEOUT, reason timeout).
    const requestedAt = Date.parse((ctx.actor.snapshot.context as ExecutionContext).requestedAt ?? '');
    const deadlineAt = (Number.isFinite(requestedAt) ? requestedAt : this.deps.nowMs()) + request.timeoutMs;
    // Step events record what was used; they are appended while the next read is under way.
    const steps: Promise<void>[] = [];
    const hint = this.hints.get(request.uri);
    // A record (or alias) read shared with the burst's other executions of it, begun after this one was submitted.
    const submittedAt = Number.isFinite(requestedAt) ? requestedAt : Number.NaN;
    const fetchRecord = (uri: string, expectCid?: string) =>
      this.records.run(`${uri}\n${expectCid ?? ''}`, submittedAt, deadlineAt, () =>
        reader.fetchRecord(uri, { deadlineAt, ...(expectCid ? { expectCid } : {}) }),
      );
    const early = hint ? fetchRecord(hint.runtimeUri) : null;
    early?.catch(() => undefined); // used (and its failure seen) only if the code record still names it
    if (hint) codePrep.start(id, hint.author, hint.blobCid, hint.entrypoint, deadlineAt);
    try {
      const target = await this.codeUris.run(request.uri, submittedAt, deadlineAt, () =>
        reader.resolveCodeUri(request.uri, { deadlineAt }),
      );
      // A job may pin the code record's version: any other version is refused (RECORD_CID_MISMATCH).
      const code = await fetchRecord(target.codeUri, request.job?.codeCid ?? target.expectCid);
      steps.push(
        this.deps.progress.step(ctx, 'code-record', {
          uri: code.uri,
          cid: code.cid,
          mode: code.mode,
          via: target.via ?? null,
        }),
      );
      const record: CodeRecord = assertCodeRecord(code.value);
      // The author listed the handlers: an unknown one is refused now, before anything is pulled or started.
      if (record.handlers && !record.handlers.includes(request.handler)) {
        throw new ValidationError(
          'HANDLER_NOT_FOUND',
          `${code.uri} exports no handler named ${request.handler} (its record lists ${record.handlers.join(', ')})`,
          [`${request.handler} is not listed`],
        );
      }
      const { limits, clamped } = admitCode(policy, record);
      const author = code.uri.slice('at://'.length).split('/')[0]!;
      const blobCid = record.blob.ref.$link;
      // The verified code record names the blob: fetch, verify and validate it while the runtime record is read.
      if (
        !hint ||
        codeKey(hint.author, hint.blobCid, hint.entrypoint) !== codeKey(author, blobCid, record.entrypoint)
      ) {
        codePrep.start(id, author, blobCid, record.entrypoint, deadlineAt);
      }
      // Fetched by URI, verified (strict: signature and proof), then bound: its CID must be the strong
      // reference's and the blob's MIME subtype (RUNTIME_BINDING_MISMATCH otherwise).
      const runtimeUri = record.runtimeRecord.uri;
      const via = target.via ? String((target.via as { uri?: string }).uri ?? target.via) : null;
      // A job's secrets are opened now, once the code (and the alias naming it) is known, so a job this runner
      // cannot or may not open them for fails before anything is pulled or started. The values stay in this
      // local for the envelope's size check and are dropped with it.
      const [runtime, platform, secrets] = await Promise.all([
        early && hint?.runtimeUri === runtimeUri ? early : fetchRecord(runtimeUri),
        this.daemonPlatform(),
        this.deps.secrets.open(request, { codeUri: code.uri, via }, deadlineAt),
      ]);
      checkRuntimeBinding(record, { uri: runtime.uri, cid: runtime.cid });
      steps.push(this.deps.progress.step(ctx, 'runtime-record', { uri: runtime.uri, cid: runtime.cid }));
      const selected = selectRuntimePlatform(runtime.value, platform, {
        acceptedProtocolVersions: policy.protocolVersions,
      });
      const image = admitRuntime(policy, selected);
      const requestedTimeout = request.timeoutMs > 0 ? request.timeoutMs : limits.timeoutMs;
      resolved = {
        codeUri: code.uri,
        codeCid: code.cid,
        via,
        author,
        runtimeName: record.runtime,
        runtimeUri: runtime.uri,
        runtimeCid: runtime.cid,
        blobCid,
        entrypoint: record.entrypoint,
        image: `${image.repository}@${image.digest}`,
        platform,
        exportPath: selected.platform.exportPath,
        launcher: selected.platform.launcher,
        env: selected.platform.env ?? [],
        additions: record.additions ?? [],
        limits: { ...limits, timeoutMs: Math.min(limits.timeoutMs, requestedTimeout) },
        clamped,
        isolation: policy.isolation,
        mode: code.mode,
      };
      // The envelope is known now but for its deadline (a fixed-length timestamp): refuse one the sandbox would
      // refuse before anything is pulled, extracted or created.
      checkEnvelope(policy, request, resolved, secrets);
      // Recorded: the secrets record and its entry names (public in the record itself), never a value.
      const checked = secrets ? checkedSecrets(request, secrets) : null;
      if (checked) steps.push(this.deps.progress.step(ctx, 'secrets', { ...checked }));
      this.hints.set(request.uri, { author, runtimeUri, blobCid, entrypoint: record.entrypoint });
      await Promise.all(steps);
    } catch (err) {
      codePrep.drop(id);
      await Promise.allSettled(steps);
      profiles.add(id, { resolveMs: performance.now() - t0 });
      await ctx.dispatch(profiles.withProfile(id, { type: 'execution.failed', data: classify(err, 'resolution') }));
      return;
    }
    profiles.add(id, { resolveMs: performance.now() - t0 });
    const result = await ctx.dispatch({ type: 'execution.resolved', data: resolved });
    if (!result.accepted) codePrep.drop(id); // cancelled meanwhile: nothing will materialize it
  }

  /** The daemon's OS/architecture does not change while it runs: asked once (again after a failure). */
  private daemonPlatform(): Promise<Platform> {
    this.platformOnce ??= this.deps
      .engine()
      .platform()
      .catch((err: unknown) => {
        this.platformOnce = null;
        throw err;
      });
    return this.platformOnce;
  }
}
