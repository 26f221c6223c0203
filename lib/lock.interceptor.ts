import {
  type CallHandler,
  type ExecutionContext,
  HttpException,
  HttpStatus,
  Inject,
  Injectable,
  type NestInterceptor,
  Optional,
} from '@nestjs/common';
import { catchError, type Observable, throwError } from 'rxjs';
import {
  AllSegmentsExhaustedError,
  LockBackendError,
  LockError,
  LockKeyError,
  LockNotAcquiredError,
} from './errors';
import type { ResolvedRedlockOptions } from './redlock-options';
import { DEFAULT_OPTIONS, RESOLVED_OPTIONS } from './redlock.constants';

/** How a lock error maps onto a transport. */
export interface LockErrorMapping {
  status: number;
  /** Stable machine-readable code, also used for RPC and GraphQL errors. */
  code: string;
  /** Seconds for `Retry-After` (busy locks only). */
  retryAfter?: number;
}

type Loaded<T> = { value?: T; tried: boolean };
const optional = <T>(load: () => T, cache: Loaded<T>): T | undefined => {
  if (!cache.tried) {
    cache.tried = true;
    try {
      cache.value = load();
    } catch {
      cache.value = undefined;
    }
  }
  return cache.value;
};
type RpcExceptionCtor = new (error: object) => Error;
type GraphQLErrorCtor = new (message: string, options: { extensions: object }) => Error;
const rpcCache: Loaded<RpcExceptionCtor> = { tried: false };
const gqlCache: Loaded<GraphQLErrorCtor> = { tried: false };

/**
 * Maps nest-locked errors thrown by handlers to transport errors: HTTP `busyStatus` (409) with
 * `Retry-After` for a busy lock, 409 when all segments are exhausted, 503 when Redis fails, 400
 * for a key that cannot be built; RPC and GraphQL errors carry the same `code`. Registered
 * globally by default (`interceptor: false` turns that off). Subclass it and override
 * `map()` to change the mapping.
 *
 * @example
 * ```ts
 * // with RedlockModule.forRoot({ interceptor: false }), per controller:
 * @UseInterceptors(LockInterceptor)
 * @Controller('orders')
 * export class OrdersController {}
 * ```
 * @publicApi
 */
@Injectable()
export class LockInterceptor implements NestInterceptor {
  protected readonly busyStatus: number;

  constructor(
    @Optional() @Inject(RESOLVED_OPTIONS) options?: Pick<ResolvedRedlockOptions, 'busyStatus'>,
  ) {
    this.busyStatus = options?.busyStatus ?? DEFAULT_OPTIONS.busyStatus;
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(
      catchError((err: unknown) => {
        const mapping = err instanceof LockError ? this.map(err) : undefined;
        if (!mapping) return throwError(() => err);
        return throwError(() => this.toTransportError(context, err as LockError, mapping));
      }),
    );
  }

  /** The mapping of one error, or `undefined` to rethrow it unchanged. */
  protected map(error: LockError): LockErrorMapping | undefined {
    if (error instanceof LockNotAcquiredError) {
      return {
        status: this.busyStatus,
        code: 'LOCK_NOT_ACQUIRED',
        retryAfter: Math.max(1, Math.ceil(error.retryAfterMs / 1000)),
      };
    }
    if (error instanceof AllSegmentsExhaustedError) {
      return { status: HttpStatus.CONFLICT, code: 'ALL_SEGMENTS_EXHAUSTED' };
    }
    if (error instanceof LockBackendError) {
      return { status: HttpStatus.SERVICE_UNAVAILABLE, code: 'LOCK_BACKEND_UNAVAILABLE' };
    }
    if (error instanceof LockKeyError) {
      return { status: HttpStatus.BAD_REQUEST, code: 'LOCK_KEY_INVALID' };
    }
    return undefined;
  }

  protected toTransportError(
    context: ExecutionContext,
    error: LockError,
    mapping: LockErrorMapping,
  ): unknown {
    const body = {
      statusCode: mapping.status,
      code: mapping.code,
      error: error.name,
      message: error.message,
      ...(mapping.retryAfter !== undefined ? { retryAfter: mapping.retryAfter } : {}),
    };
    switch (context.getType<string>()) {
      case 'http': {
        if (mapping.retryAfter !== undefined) {
          const res = context.switchToHttp().getResponse<{
            header?: (k: string, v: string) => unknown;
            setHeader?: (k: string, v: string) => unknown;
          }>();
          const value = String(mapping.retryAfter);
          if (typeof res?.header === 'function') res.header('Retry-After', value);
          else res?.setHeader?.('Retry-After', value);
        }
        return new HttpException(body, mapping.status, { cause: error });
      }
      case 'rpc': {
        const RpcException = optional(
          () =>
            // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional peer
            (require('@nestjs/microservices') as { RpcException: RpcExceptionCtor }).RpcException,
          rpcCache,
        );
        return RpcException ? new RpcException(body) : error;
      }
      case 'graphql': {
        const GraphQLError = optional(
          // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional peer
          () => (require('graphql') as { GraphQLError: GraphQLErrorCtor }).GraphQLError,
          gqlCache,
        );
        return GraphQLError
          ? new GraphQLError(error.message, { extensions: { ...body, message: undefined } })
          : error;
      }
      default:
        return error;
    }
  }
}
