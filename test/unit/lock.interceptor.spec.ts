import { HttpException, type CallHandler, type ExecutionContext } from '@nestjs/common';
import { RpcException } from '@nestjs/microservices';
import { lastValueFrom, throwError } from 'rxjs';
import {
  AllSegmentsExhaustedError,
  LockBackendError,
  LockInterceptor,
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
} from '../../lib';

function context(type: 'http' | 'rpc', headers: Record<string, string> = {}): ExecutionContext {
  const res = { setHeader: (k: string, v: string) => (headers[k] = v) };
  return {
    getType: () => type,
    switchToHttp: () => ({ getResponse: () => res }),
  } as unknown as ExecutionContext;
}
const failing = (error: unknown): CallHandler => ({ handle: () => throwError(() => error) });

async function intercept(error: unknown, type: 'http' | 'rpc' = 'http', busyStatus = 409) {
  const headers: Record<string, string> = {};
  const interceptor = new LockInterceptor({ busyStatus });
  const thrown = await lastValueFrom(
    interceptor.intercept(context(type, headers), failing(error)),
  ).catch((e: unknown) => e);
  return { thrown, headers };
}

describe('LockInterceptor', () => {
  it('maps a busy lock to busyStatus with Retry-After (rounded up, at least 1 s)', async () => {
    const { thrown, headers } = await intercept(new LockNotAcquiredError(['p:1'], 5_000, 2_300));
    expect(thrown).toBeInstanceOf(HttpException);
    expect((thrown as HttpException).getStatus()).toBe(409);
    expect((thrown as HttpException).getResponse()).toMatchObject({ code: 'LOCK_NOT_ACQUIRED' });
    expect(headers['Retry-After']).toBe('3');
    const quick = await intercept(new LockNotAcquiredError(['p:1'], 0, 10), 'http', 423);
    expect((quick.thrown as HttpException).getStatus()).toBe(423);
    expect(quick.headers['Retry-After']).toBe('1');
  });

  it.each([
    [new LockBackendError(['p:1'], [new Error('ECONNREFUSED')]), 503, 'LOCK_BACKEND_UNAVAILABLE'],
    [new LockKeyError('bad key', 'p:{id}', 'id'), 400, 'LOCK_KEY_INVALID'],
    [new AllSegmentsExhaustedError(['stock:a'], 10), 409, 'ALL_SEGMENTS_EXHAUSTED'],
  ])('maps %p to HTTP %i', async (error, status, code) => {
    const { thrown, headers } = await intercept(error);
    expect((thrown as HttpException).getStatus()).toBe(status);
    expect((thrown as HttpException).getResponse()).toMatchObject({ code, error: error.name });
    expect(headers['Retry-After']).toBeUndefined();
  });

  it('leaves other errors alone', async () => {
    const plain = new Error('boom');
    expect((await intercept(plain)).thrown).toBe(plain);
    const lost = new LockLostError(['p:1'], 'lost');
    expect((await intercept(lost)).thrown).toBe(lost);
  });

  it('maps to RpcException with the same code for microservices', async () => {
    const { thrown } = await intercept(new LockNotAcquiredError(['p:1'], 10, 10), 'rpc');
    expect(thrown).toBeInstanceOf(RpcException);
    expect((thrown as RpcException).getError()).toMatchObject({
      code: 'LOCK_NOT_ACQUIRED',
      statusCode: 409,
    });
  });
});
