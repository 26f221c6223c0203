import { STATUS_CODES } from 'node:http';
import {
  type CallHandler,
  type ExecutionContext,
  HttpException,
  HttpStatus,
  Inject,
  Injectable,
  Logger,
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
  LockOrderError,
} from '../errors';
import type { ResolvedRedlockOptions } from '../options/redlock-options';
import { DEFAULT_OPTIONS, RESOLVED_OPTIONS } from '../redlock.constants';
import { CLIENT_MESSAGES, SERVER_ERROR_ANSWERED } from './api.messages';

/** How a lock error maps onto a transport. */
export interface LockErrorMapping {
  status: number;
  /** Stable machine-readable code, also used for RPC, WebSocket and GraphQL errors. */
  code: string;
  /**
   * What the client is told, in the terms of its request. The error's own message (lock keys,
   * Redis errors) stays on the error object and in the logs.
   */
  message: string;
  /** Seconds for `Retry-After` (busy locks only). */
  retryAfter?: number;
}

/** The body of a mapped error, as a client receives it over HTTP and RPC. */
export interface LockErrorBody {
  statusCode: number;
  /** The HTTP reason phrase of `statusCode` (`'Conflict'`), as Nest's own errors give it. */
  error: string;
  message: string;
  code: string;
  retryAfter?: number;
}

/** A class of an optional peer, loaded on first use (undefined when it is not installed). */
function lazyPeer<T>(load: () => T): () => T | undefined {
  let tried = false;
  let value: T | undefined;
  return () => {
    if (!tried) {
      tried = true;
      try {
        value = load();
      } catch {
        value = undefined;
      }
    }
    return value;
  };
}
type RpcExceptionCtor = new (error: object) => Error;
type WsExceptionCtor = new (error: object) => Error;
type GraphQLErrorCtor = new (
  message: string,
  options: { extensions: object; originalError: Error },
) => Error;
/* eslint-disable @typescript-eslint/no-require-imports -- optional peers */
const rpcException = lazyPeer(
  () => (require('@nestjs/microservices') as { RpcException: RpcExceptionCtor }).RpcException,
);
const wsException = lazyPeer(
  () => (require('@nestjs/websockets') as { WsException: WsExceptionCtor }).WsException,
);
const graphQLError = lazyPeer(
  () => (require('graphql') as { GraphQLError: GraphQLErrorCtor }).GraphQLError,
);
/* eslint-enable @typescript-eslint/no-require-imports */

/**
 * The error mapper (public name `LockInterceptor`): maps nest-locked errors thrown by handlers
 * to transport errors, and does nothing else. HTTP `busyStatus` (409) with `Retry-After` for a
 * busy lock, 409 when all segments are exhausted, 503 when the lock backend fails, 400
 * for a key that cannot be built; RPC, WebSocket (`WsException`) and GraphQL errors carry the
 * same `code`. The client is told what happened in the terms of its request, never a lock key
 * or a Redis error: those stay on the error (the `cause` of the `HttpException`, the
 * `originalError` of the `GraphQLError`), and a 5xx is logged at WARN with them. Registered
 * globally by default, and on every WebSocket and microservice message handler (which Nest's
 * global interceptors do not reach); `interceptor: false` turns both off. Subclass it and
 * override `map()` to change the mapping (then bind the subclass yourself).
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
  protected readonly logger = new Logger('nest-locked');

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
        const error = err as LockError;
        // Once per request: the client's answer says nothing of the cause, the log does.
        if (mapping.status >= 500) {
          this.logger.warn(SERVER_ERROR_ANSWERED(handlerName(context), mapping.status, error));
        }
        return throwError(() => this.toTransportError(context, error, mapping));
      }),
    );
  }

  /** The mapping of one error, or `undefined` to rethrow it unchanged. */
  protected map(error: LockError): LockErrorMapping | undefined {
    if (error instanceof LockNotAcquiredError) {
      return {
        status: this.busyStatus,
        code: 'LOCK_NOT_ACQUIRED',
        message: CLIENT_MESSAGES.busy,
        // Whole seconds; `retryAfterMs` is the key's usual hold here (at most 1 s without one),
        // never past the holder's lease.
        retryAfter: Math.max(1, Math.ceil(error.retryAfterMs / 1000)),
      };
    }
    if (error instanceof AllSegmentsExhaustedError) {
      return {
        status: HttpStatus.CONFLICT,
        code: 'ALL_SEGMENTS_EXHAUSTED',
        message: CLIENT_MESSAGES.exhausted,
      };
    }
    if (error instanceof LockBackendError) {
      return {
        status: HttpStatus.SERVICE_UNAVAILABLE,
        code: 'LOCK_BACKEND_UNAVAILABLE',
        message: CLIENT_MESSAGES.unavailable,
      };
    }
    // The database broke a deadlock by failing this call: another request got through, so a
    // retry can too. A refusal of lockOrder: 'throw' is a programming error: left as a 500.
    if (error instanceof LockOrderError && error.detectedBy === 'server') {
      return {
        status: HttpStatus.CONFLICT,
        code: 'LOCK_DEADLOCK',
        message: CLIENT_MESSAGES.deadlock,
      };
    }
    if (error instanceof LockKeyError) {
      return {
        status: HttpStatus.BAD_REQUEST,
        code: 'LOCK_KEY_INVALID',
        message: CLIENT_MESSAGES.badRequest(error.placeholder),
      };
    }
    return undefined;
  }

  protected toTransportError(
    context: ExecutionContext,
    error: LockError,
    mapping: LockErrorMapping,
  ): unknown {
    const { status, code, message, retryAfter } = mapping;
    const more = retryAfter !== undefined ? { retryAfter } : {};
    const body: LockErrorBody = {
      statusCode: status,
      error: STATUS_CODES[status] ?? 'Error',
      message,
      code,
      ...more,
    };
    switch (context.getType<string>()) {
      case 'http': {
        if (retryAfter !== undefined) {
          const res = context.switchToHttp().getResponse<{
            header?: (k: string, v: string) => unknown;
            setHeader?: (k: string, v: string) => unknown;
          }>();
          const value = String(retryAfter);
          if (typeof res?.header === 'function') res.header('Retry-After', value);
          else res?.setHeader?.('Retry-After', value);
        }
        return new HttpException(body, status, { cause: error });
      }
      case 'rpc': {
        const RpcException = rpcException();
        return RpcException ? new RpcException(body) : error;
      }
      case 'ws': {
        const WsException = wsException();
        // The shape Nest's WebSocket exception filter emits for its own errors
        // ({ status: 'error', message }), plus the code.
        return WsException ? new WsException({ status: 'error', code, message, ...more }) : error;
      }
      case 'graphql': {
        const GraphQLError = graphQLError();
        return GraphQLError
          ? new GraphQLError(message, {
              extensions: { code, statusCode: status, ...more },
              originalError: error,
            })
          : error;
      }
      default:
        return error;
    }
  }
}

/** `Class.method` of the handler, for the log. */
function handlerName(context: ExecutionContext): string {
  const type = context.getClass?.()?.name ?? 'a handler';
  const method = context.getHandler?.()?.name;
  return method ? `${type}.${method}` : type;
}
