import { Inject, Optional } from '@nestjs/common';
import { PROPERTY_DEPS_METADATA } from '@nestjs/common/constants';
import type { Observable } from 'rxjs';
import { LockConfigError } from '../errors';
import type { LockedOptions } from '../interfaces';
import { compileKeySource, type KeySource } from '../keys';
import type { CheckedKeys, PlaceholderProblems } from '../keys/template-check';
import { LockService, type LockedMethod } from './lock.service';
import { templateClasses } from '../lock-order/call-classes';
import { validateBehaviour } from '../options/redlock-options';
import { LOCK_SERVICE_PROPERTY, LOCKED_METADATA } from '../redlock.constants';
import {
  LOCKED_NOT_A_METHOD,
  LOCKED_SEGMENTS_KEYS,
  LOCKED_STATIC,
  NO_LOCK_SERVICE,
  type TYPE_KEY_FUNCTION_PARAMETERS,
  type TYPE_KEY_FUNCTION_THIS,
  type TYPE_NOT_ASYNC,
  type TYPE_SKIP_RESOLVES_UNDEFINED,
  type TYPE_UNKNOWN_OPTION,
} from './api.messages';

type AnyMethod = (...args: never[]) => unknown;

/**
 * A method `@Locked` accepts: one whose result is already asynchronous. The lock makes every call
 * asynchronous, and a decorator cannot change the method's declared type, so a sync method would
 * keep promising a value while its callers get a Promise. An Observable is accepted for Nest
 * handlers (Nest awaits the call and subscribes); a direct caller gets a Promise of it.
 */
export type LockableMethod = (...args: never[]) => PromiseLike<unknown> | Observable<unknown>;

/** A compile-time failure, shown by TypeScript as the missing property's name. */
type Refused<Message extends string> = { [M in Message]: never };

/** The method's parameters against a key function's: the method must accept what it is given. */
type KeyFunctionCheck<K, M> = [K] extends [(...args: infer A) => unknown]
  ? M extends (...args: [...A, ...never[]]) => unknown
    ? unknown
    : Refused<TYPE_KEY_FUNCTION_PARAMETERS>
  : unknown;

/** A key function's `this` parameter, if it declares one, against the class it decorates. */
type KeyThisCheck<K, T> = [K] extends [(this: infer This, ...args: never[]) => unknown]
  ? T extends This
    ? unknown
    : Refused<TYPE_KEY_FUNCTION_THIS>
  : unknown;

/** `onBusy: 'skip'` resolves `undefined` instead of running the method. */
type SkipCheck<O, M> = [O] extends [never]
  ? unknown // options typed `never` (a cast): nothing to see
  : O extends { onBusy: 'skip' }
    ? M extends (...args: never[]) => PromiseLike<infer R>
      ? undefined extends R
        ? unknown
        : Refused<TYPE_SKIP_RESOLVES_UNDEFINED>
      : unknown
    : unknown;

/**
 * Option keys `LockedOptions` does not have. An object literal with only unknown keys is already
 * refused at the call; one that mixes known and unknown keys is refused here.
 */
type UnknownOptions<O> = O extends unknown ? Exclude<keyof O, keyof LockedOptions> : never;

/** What the compiler can check of a method under `@Locked(keys, options)`. */
type LockedMethodCheck<K, O, M> = M extends LockableMethod
  ? ([PlaceholderProblems<K, Parameters<M>>] extends [never]
      ? unknown
      : Refused<`@Locked ${PlaceholderProblems<K, Parameters<M>>}`>) &
      KeyFunctionCheck<K, M> &
      SkipCheck<O, M> &
      ([UnknownOptions<O>] extends [never]
        ? unknown
        : Refused<TYPE_UNKNOWN_OPTION<UnknownOptions<O>>>)
  : Refused<TYPE_NOT_ASYNC>;

/**
 * The method decorator `@Locked(keys, options)` returns. `M` is the decorated method's type; the
 * descriptor's extra requirements make TypeScript report what it can see is wrong (see `Locked`).
 */
export type LockedDecorator<K, O> = <M, T extends object>(
  target: T,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<M> & LockedMethodCheck<K, O, M> & KeyThisCheck<K, T>,
) => TypedPropertyDescriptor<M>;

/**
 * Holds a distributed lock while the method runs: one holder at a time per rendered key across
 * every instance of the app, the lease renewed while the method runs, released when it settles.
 *
 * - `'product:{id}'`: a template; `{name}` is a parameter, `{0}` an argument index, either with a
 *   property path (`{dto.customer.id}`, `{0.items.2.sku}`); `{{`/`}}` are literal braces. Unknown
 *   placeholders fail at decoration time; unusable values (`undefined`, `''`, objects...) fail the
 *   call with `LockKeyError` before anything is locked.
 * - `['account:{from}', 'account:{to}']`: all keys or none, taken in sorted order (no deadlock).
 * - `(from: string, to: string) => [...]`: build the keys yourself. The function is called with
 *   the instance as `this`: `function (this: OrderService, id: string) { return ... }` reads
 *   instance state (an arrow function has no `this` of its own).
 *
 * Works on services, controllers (after pipes), resolvers, microservice handlers and `@Cron`
 * jobs, above or below their decorators. The method must be async (return a Promise or an
 * Observable): every locked call is, and a decorator cannot change the declared type. A Promise
 * holds the lock until it settles; an Observable until it completes, errors or is unsubscribed.
 * A call that already holds the keys in its async context re-enters without a round trip.
 *
 * Checked by the compiler (as far as types can see): template syntax, argument indices against
 * the parameter list (`{2}` on a two-parameter method), property paths of typed arguments
 * (`{0.customer.idd}`), a sync method, a key function whose parameters do not fit the method, and
 * `onBusy: 'skip'` on a method whose result type has no `undefined`. Parameter names are not part
 * of a function's type, so `{idd}` is caught when the class is defined, not by the compiler.
 *
 * @throws LockNotAcquiredError still busy after `waitTimeout` (HTTP 409 + Retry-After)
 * @throws LockBackendError Redis unreachable (HTTP 503)
 * @throws LockKeyError a key cannot be rendered from the arguments (HTTP 400)
 * @example
 * ```ts
 * @Injectable()
 * export class ProductService {
 *   constructor(private readonly repo: StockRepository) {}
 *
 *   @Locked('product:{id}', { waitTimeout: 2_000 })
 *   async purchase(id: number, qty: number) {
 *     const stock = await this.repo.stock(id);
 *     if (stock < qty) throw new ConflictException('insufficient stock');
 *     await this.repo.setStock(id, stock - qty);
 *   }
 * }
 * ```
 * @publicApi
 */
export function Locked<
  const K extends KeySource<never[]>,
  O extends LockedOptions = Record<never, never>,
>(keys: CheckedKeys<K>, options?: O): LockedDecorator<K, O>;
export function Locked(
  keys: KeySource<never[]>,
  options: LockedOptions = {},
): <M>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<M>,
) => TypedPropertyDescriptor<M> {
  return (target, propertyKey, descriptor) => {
    const owner = typeof target === 'function' ? target.name : target.constructor.name;
    const where = `${owner}.${String(propertyKey)}`;
    const original = descriptor?.value as AnyMethod | undefined;
    if (typeof original !== 'function') {
      throw new LockConfigError(LOCKED_NOT_A_METHOD(where), where);
    }
    if (typeof target === 'function') {
      throw new LockConfigError(LOCKED_STATIC(where), where);
    }
    validateBehaviour(options, `@Locked on ${where}`, 'decorator');
    if (
      options.segments !== undefined &&
      (Array.isArray(keys) ? keys.length !== 1 : typeof keys !== 'string')
    ) {
      throw new LockConfigError(LOCKED_SEGMENTS_KEYS(where), `@Locked on ${where}.segments`);
    }
    const method: LockedMethod = Object.freeze({
      where,
      render: compileKeySource(keys, original, where),
      options: Object.freeze({ ...options }),
      classes: templateClasses(keys),
    });

    // A Proxy keeps name, length and own properties; Nest reads route, cron and other metadata
    // from the function it finds on the prototype, so every key is copied over too.
    const proxy = new Proxy(original, {
      apply(fn, thisArg: Record<symbol, unknown> | undefined, args: unknown[]) {
        const service = thisArg?.[LOCK_SERVICE_PROPERTY] as LockService | undefined;
        if (!service) {
          return Promise.reject(new LockConfigError(NO_LOCK_SERVICE(where), 'LockService'));
        }
        return service.runDecorated(method, () => Reflect.apply(fn, thisArg, args), args, thisArg);
      },
    });
    for (const key of Reflect.getOwnMetadataKeys(original)) {
      Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, original), proxy);
    }
    Reflect.defineMetadata(LOCKED_METADATA, method, proxy);
    descriptor.value = proxy as unknown as typeof descriptor.value;

    // Property injection: the instance Nest builds gets the LockService of its own app, so no
    // global state is shared between apps (or test modules) in one process. Optional: without
    // a lock module Nest's own error would name only an internal symbol; the call then rejects
    // with NO_LOCK_SERVICE, which says what to import.
    const deps = (Reflect.getMetadata(PROPERTY_DEPS_METADATA, target.constructor) ?? []) as {
      key: string | symbol;
    }[];
    if (!deps.some((d) => d.key === LOCK_SERVICE_PROPERTY)) {
      Inject(LockService)(target, LOCK_SERVICE_PROPERTY);
      Optional()(target, LOCK_SERVICE_PROPERTY);
    }
    return descriptor;
  };
}

/** The `@Locked` settings of a method, if it has them. @internal */
export function getLockedMethod(fn: unknown): LockedMethod | undefined {
  return typeof fn === 'function' ? Reflect.getMetadata(LOCKED_METADATA, fn) : undefined;
}
