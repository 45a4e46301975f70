// The Docker adapter's typed errors and engineTrouble (which replaced the status-code and errno sniffing in
// supervisor/instances/instances.ts): built directly, no Engine needed.
import { describe, expect, it } from 'vitest';
import {
  dockerAnswerError,
  DockerApiError,
  DockerConflictError,
  DockerNotFoundError,
  DockerTimeoutError,
  DockerUnavailableError,
  engineTrouble,
  ImagePullError,
} from '../../../src/adapters/docker/errors.ts';
import { httpStatusOf } from '../../../src/domain/error-codes.ts';
import { RunlogError } from '../../../src/domain/errors.ts';

describe('Docker errors', () => {
  it('an answer becomes the class of its status, each a DockerApiError with a code from the table', () => {
    const nf = dockerAnswerError('start container x', 'no such container', 404);
    expect(nf).toBeInstanceOf(DockerNotFoundError);
    expect(nf).toMatchObject({ code: 'DOCKER_NOT_FOUND', status: 404 });
    const cf = dockerAnswerError('create container', 'name in use', 409);
    expect(cf).toBeInstanceOf(DockerConflictError);
    expect(cf.code).toBe('DOCKER_CONFLICT');
    const other = dockerAnswerError('create container', 'bad parameter', 400);
    expect(other.constructor).toBe(DockerApiError);
    expect(other.code).toBe('DOCKER_API');
    for (const e of [nf, cf, other]) expect(e).toBeInstanceOf(DockerApiError);
    expect(httpStatusOf(nf.code)).toBe(404);
    expect(httpStatusOf(cf.code)).toBe(409);
    expect(httpStatusOf(new DockerUnavailableError('/s', 'ECONNREFUSED').code)).toBe(503);
    expect(httpStatusOf(new DockerTimeoutError('inspect', 100).code)).toBe(504);
  });

  it('engineTrouble: down for no answer, error for 5xx or a timeout, null for the caller’s own mistakes (also through causes)', () => {
    const wrap = (cause: unknown) => new RunlogError('SPAWN_FAILED', 'could not start', undefined, { cause });
    expect(engineTrouble(new DockerUnavailableError('/s', 'ECONNREFUSED'))).toBe('down');
    expect(engineTrouble(wrap(wrap(new DockerUnavailableError('/s', 'ENOENT'))))).toBe('down');
    expect(engineTrouble(wrap(dockerAnswerError('start', 'server error', 500)))).toBe('error');
    expect(engineTrouble(wrap(new DockerTimeoutError('start', 60_000)))).toBe('error');
    expect(engineTrouble(wrap(new ImagePullError('r@sha256:x', 'daemon shutting down', false, { status: 503 })))).toBe(
      'error',
    );
    expect(engineTrouble(wrap(new ImagePullError('r@sha256:x', 'manifest unknown', true, { status: 404 })))).toBeNull();
    expect(engineTrouble(wrap(dockerAnswerError('start', 'no such container', 404)))).toBeNull();
    expect(engineTrouble(wrap(dockerAnswerError('create', 'conflict', 409)))).toBeNull();
    // A raw errno from something that is not the Engine (an app's port refusing the health check) is not Docker's.
    expect(
      engineTrouble(wrap(Object.assign(new Error('connect ECONNREFUSED 10.0.0.2:3000'), { code: 'ECONNREFUSED' }))),
    ).toBeNull();
    expect(engineTrouble(new Error('x'))).toBeNull();
    expect(engineTrouble(undefined)).toBeNull();
  });
});
