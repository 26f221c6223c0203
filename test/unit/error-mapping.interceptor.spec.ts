import { HttpException, Logger, type CallHandler, type ExecutionContext } from '@nestjs/common';
import { ExecutionContextHost } from '@nestjs/core/helpers/execution-context-host';
import { RpcException } from '@nestjs/microservices';
import {
  BaseWsExceptionFilter,
  MessageBody,
  SubscribeMessage,
  WebSocketGateway,
  WsException,
} from '@nestjs/websockets';
import { GraphQLError } from 'graphql';
import { defer, lastValueFrom, throwError } from 'rxjs';
import {
  AllSegmentsExhaustedError,
  LockBackendError,
  LockInterceptor,
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  LockOrderError,
} from '../../lib';

type Transport = 'http' | 'rpc' | 'ws' | 'graphql';

function context(type: Transport, headers: Record<string, string> = {}): ExecutionContext {
  const res = { setHeader: (k: string, v: string) => (headers[k] = v) };
  return {
    getType: () => type,
    getClass: () => OrdersController,
    getHandler: () => OrdersController.prototype.pay,
    switchToHttp: () => ({ getResponse: () => res }),
  } as unknown as ExecutionContext;
}
class OrdersController {
  pay() {}
}
const failing = (error: unknown): CallHandler => ({ handle: () => throwError(() => error) });

async function intercept(error: unknown, type: Transport = 'http', busyStatus = 409) {
  const headers: Record<string, string> = {};
  const interceptor = new LockInterceptor({ busyStatus });
  const thrown = await lastValueFrom(
    interceptor.intercept(context(type, headers), failing(error)),
  ).catch((e: unknown) => e);
  return { thrown, headers };
}

/** What a driver says when Redis is down and the offline queue is off. */
const driverError = () =>
  new Error("Stream isn't writeable and enableOfflineQueue options is false");
const backendError = () => new LockBackendError(['order:secret-42'], [driverError()]);

let warn: jest.SpyInstance;
beforeEach(() => {
  warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
});
afterEach(() => warn.mockRestore());

describe('LockInterceptor over HTTP', () => {
  it('maps a busy lock to busyStatus with Retry-After (rounded up, at least 1 s)', async () => {
    const { thrown, headers } = await intercept(new LockNotAcquiredError(['p:1'], 5_000, 2_300));
    expect(thrown).toBeInstanceOf(HttpException);
    expect((thrown as HttpException).getStatus()).toBe(409);
    expect(headers['Retry-After']).toBe('3');
    const quick = await intercept(new LockNotAcquiredError(['p:1'], 0, 10), 'http', 423);
    expect((quick.thrown as HttpException).getStatus()).toBe(423);
    expect(quick.headers['Retry-After']).toBe('1');
    expect((quick.thrown as HttpException).getResponse()).toMatchObject({
      statusCode: 423,
      error: 'Locked',
    });
  });

  it.each([
    [
      'a busy lock',
      new LockNotAcquiredError(['order:secret-42'], 5_000, 2_300),
      409,
      {
        error: 'Conflict',
        message: 'The resource is busy; retry later.',
        code: 'LOCK_NOT_ACQUIRED',
        retryAfter: 3,
      },
    ],
    [
      'a backend failure',
      backendError(),
      503,
      {
        error: 'Service Unavailable',
        message: 'The service is temporarily unavailable.',
        code: 'LOCK_BACKEND_UNAVAILABLE',
      },
    ],
    [
      'a bad placeholder value',
      new LockKeyError(
        'Lock key template "order:{id}": placeholder {id} is undefined',
        'order:{id}',
        'id',
      ),
      400,
      {
        error: 'Bad Request',
        message: 'Invalid request: no valid value for "id".',
        code: 'LOCK_KEY_INVALID',
      },
    ],
    [
      'a bad raw key',
      new LockKeyError(
        'Invalid lock key (LockService.using): got an empty string',
        'order:secret-42',
      ),
      400,
      {
        error: 'Bad Request',
        message: 'Invalid request: its values do not identify a resource.',
        code: 'LOCK_KEY_INVALID',
      },
    ],
    [
      'exhausted slices',
      new AllSegmentsExhaustedError(['stock:secret-42'], 10),
      409,
      {
        error: 'Conflict',
        message: 'The resource cannot serve this request now.',
        code: 'ALL_SEGMENTS_EXHAUSTED',
      },
    ],
    [
      'a deadlock the database broke (it chose this call)',
      new LockOrderError(
        ['order:secret-42'],
        [],
        'ERROR: deadlock detected (Process 7 waits for AdvisoryLock on Redis secret)',
        'server',
      ),
      409,
      {
        error: 'Conflict',
        message: 'The request conflicted with another one; retry it.',
        code: 'LOCK_DEADLOCK',
      },
    ],
  ])('maps %s to its status, with a body in the client’s terms', async (_, error, status, body) => {
    const { thrown, headers } = await intercept(error);
    const http = thrown as HttpException;
    expect(http.getStatus()).toBe(status);
    expect(http.getResponse()).toEqual({ statusCode: status, ...body });
    expect(headers['Retry-After']).toBe('retryAfter' in body ? '3' : undefined);
    // Nothing of the lock key, the template or the driver reaches the client...
    const sent = JSON.stringify(http.getResponse());
    for (const secret of ['secret', 'order:', 'enableOfflineQueue', 'Redis', 'Lock']) {
      expect(sent).not.toContain(secret);
    }
    // ...the details stay on the error object.
    expect(http.cause).toBe(error);
  });

  it('logs a 503 at WARN once per request, with the details the client is not told', async () => {
    const error = backendError();
    await intercept(error);
    expect(warn).toHaveBeenCalledTimes(1);
    const [line] = warn.mock.calls[0] as [string];
    expect(line).toContain('OrdersController.pay answered 503');
    expect(line).toContain('order:secret-42');
    expect(line).toContain('enableOfflineQueue options is false');
  });

  it('does not log contention or a bad key (the client is told all there is)', async () => {
    await intercept(new LockNotAcquiredError(['p:1'], 5_000, 2_300));
    await intercept(new LockKeyError('bad key', 'p:{id}', 'id'));
    expect(warn).not.toHaveBeenCalled();
  });

  it('leaves other errors alone', async () => {
    const plain = new Error('boom');
    expect((await intercept(plain)).thrown).toBe(plain);
    const lost = new LockLostError(['p:1'], 'lost');
    expect((await intercept(lost)).thrown).toBe(lost);
    // lockOrder: 'throw' refused a call: a programming error, a 500 with the report in the log.
    const refused = new LockOrderError(['p:1'], [], 'a -> b, b -> a');
    expect((await intercept(refused)).thrown).toBe(refused);
  });
});

describe('LockInterceptor over RPC', () => {
  it('maps to RpcException with the same code and body', async () => {
    const { thrown } = await intercept(new LockNotAcquiredError(['p:1'], 10, 10), 'rpc');
    expect(thrown).toBeInstanceOf(RpcException);
    expect((thrown as RpcException).getError()).toEqual({
      statusCode: 409,
      error: 'Conflict',
      message: 'The resource is busy; retry later.',
      code: 'LOCK_NOT_ACQUIRED',
      retryAfter: 1,
    });
  });
});

describe('LockInterceptor in a WebSocket gateway', () => {
  @WebSocketGateway()
  class ShopGateway {
    constructor(private readonly failure: Error) {}

    /** Stands for a `@Locked` handler whose lock stayed busy, or whose Redis is down. */
    @SubscribeMessage('buy')
    buy(@MessageBody() productId: string): Promise<string> {
      void productId;
      return Promise.reject(this.failure);
    }
  }

  /** Calls `buy` as Nest's WebSocket context does: interceptor, then the exception filter. */
  async function emitBuy(failure: Error): Promise<{ thrown: unknown; emitted: unknown[] }> {
    const emitted: unknown[] = [];
    const client = { emit: (...args: unknown[]) => emitted.push(args) };
    const gateway = new ShopGateway(failure);
    const host = new ExecutionContextHost(
      [client, 'p-1', 'buy'],
      ShopGateway,
      ShopGateway.prototype.buy,
    );
    host.setType('ws');
    const thrown = await lastValueFrom(
      new LockInterceptor().intercept(host, { handle: () => defer(() => gateway.buy('p-1')) }),
    ).catch((e: unknown) => e);
    new BaseWsExceptionFilter().catch(thrown, host);
    return { thrown, emitted };
  }

  it('maps a busy lock to WsException { status, code, message, retryAfter }', async () => {
    const { thrown, emitted } = await emitBuy(new LockNotAcquiredError(['product:p-1'], 0, 1_500));
    expect(thrown).toBeInstanceOf(WsException);
    expect(emitted).toEqual([
      [
        'exception',
        {
          status: 'error',
          code: 'LOCK_NOT_ACQUIRED',
          message: 'The resource is busy; retry later.',
          retryAfter: 2,
        },
      ],
    ]);
  });

  it('maps a backend failure to WsException, logging the details instead of sending them', async () => {
    const { emitted } = await emitBuy(backendError());
    expect(emitted).toEqual([
      [
        'exception',
        {
          status: 'error',
          code: 'LOCK_BACKEND_UNAVAILABLE',
          message: 'The service is temporarily unavailable.',
        },
      ],
    ]);
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0][0]).toContain('ShopGateway.buy answered 503');
  });
});

describe('LockInterceptor in a GraphQL resolver', () => {
  it('maps to GraphQLError with extensions.code, the original error kept as originalError', async () => {
    const error = new LockNotAcquiredError(['order:secret-42'], 10, 4_200);
    const { thrown } = await intercept(error, 'graphql');
    expect(thrown).toBeInstanceOf(GraphQLError);
    const gql = thrown as GraphQLError;
    expect(gql.message).toBe('The resource is busy; retry later.');
    expect(gql.extensions).toEqual({ code: 'LOCK_NOT_ACQUIRED', statusCode: 409, retryAfter: 5 });
    expect(gql.originalError).toBe(error);
    // What a GraphQL server sends: message, locations, path, extensions.
    expect(JSON.stringify(gql.toJSON())).not.toContain('secret');
  });

  it.each([
    ['a backend failure', backendError(), 'LOCK_BACKEND_UNAVAILABLE', 503],
    ['a bad key', new LockKeyError('bad', 'order:{id}', 'id'), 'LOCK_KEY_INVALID', 400],
    [
      'exhausted slices',
      new AllSegmentsExhaustedError(['stock:a'], 4),
      'ALL_SEGMENTS_EXHAUSTED',
      409,
    ],
  ])('maps %s to its extensions.code', async (_, error, code, statusCode) => {
    const { thrown } = await intercept(error, 'graphql');
    expect(thrown).toBeInstanceOf(GraphQLError);
    expect((thrown as GraphQLError).extensions).toEqual({ code, statusCode });
  });
});
