import { Inject } from '@nestjs/common';
import { PROPERTY_DEPS_METADATA } from '@nestjs/common/constants';
import { LockConfigError } from './errors';
import type { LockedOptions } from './interfaces';
import { compileKeySource, type KeySource } from './key-template';
import { LockService, type LockedMethod } from './lock.service';
import { validateBehaviour } from './redlock-options';
import { LOCK_SERVICE_PROPERTY, LOCKED_METADATA } from './redlock.constants';
import { NO_LOCK_SERVICE } from './redlock.messages';

type AnyMethod = (...args: never[]) => unknown;

/**
 * Holds a distributed lock while the method runs: one holder at a time per rendered key across
 * every instance of the app, the lease renewed while the method runs, released when it settles.
 *
 * - `'product:{id}'`: a template; `{name}` is a parameter, `{0}` an argument index, either with a
 *   property path (`{dto.customer.id}`, `{0.items.2.sku}`); `{{`/`}}` are literal braces. Unknown
 *   placeholders fail at decoration time; unusable values (`undefined`, `''`, objects...) fail the
 *   call with `LockKeyError` before anything is locked.
 * - `['account:{from}', 'account:{to}']`: all keys or none, taken in sorted order (no deadlock).
 * - `(from: string, to: string) => [...]`: build the keys yourself.
 *
 * Works on services, controllers (after pipes), resolvers, microservice handlers and `@Cron`
 * jobs, above or below their decorators. The method becomes async (a sync result comes back as
 * a Promise); an Observable result holds the lock until it completes, errors or is unsubscribed.
 * A call that already holds the keys in its async context re-enters without a round trip.
 *
 * @throws LockNotAcquiredError still busy after `waitTimeout` (HTTP 409 + Retry-After)
 * @throws LockBackendError Redis unreachable (HTTP 503)
 * @throws LockKeyError a key cannot be rendered from the arguments (HTTP 400)
 * @example
 * ```ts
 * @Injectable()
 * export class ProductService {
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
export function Locked<A extends unknown[] = never[]>(
  keys: KeySource<A>,
  options: LockedOptions = {},
): <M extends (...args: [...A, ...never[]]) => unknown>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<M>,
) => TypedPropertyDescriptor<M> {
  return (target, propertyKey, descriptor) => {
    const owner = typeof target === 'function' ? target.name : target.constructor.name;
    const where = `${owner}.${String(propertyKey)}`;
    const original = descriptor?.value as AnyMethod | undefined;
    if (typeof original !== 'function') {
      throw new LockConfigError(`@Locked can only decorate a method; ${where} is not one.`, where);
    }
    if (typeof target === 'function') {
      throw new LockConfigError(
        `@Locked cannot decorate the static method ${where}: it needs the instance Nest built.`,
        where,
      );
    }
    validateBehaviour(options, `@Locked on ${where}`);
    if (
      options.segments !== undefined &&
      (Array.isArray(keys) ? keys.length !== 1 : typeof keys !== 'string')
    ) {
      throw new LockConfigError(
        `@Locked on ${where}: "segments" needs exactly one template naming the split resource ` +
          `(e.g. 'stock:{sku}'), not several keys or a function.`,
        `@Locked on ${where}.segments`,
      );
    }
    const method: LockedMethod = Object.freeze({
      where,
      render: compileKeySource(keys as KeySource, original, where),
      options: Object.freeze({ ...options }),
    });

    // A Proxy keeps name, length and own properties; Nest reads route, cron and other metadata
    // from the function it finds on the prototype, so every key is copied over too.
    const proxy = new Proxy(original, {
      apply(fn, thisArg: Record<symbol, unknown> | undefined, args: unknown[]) {
        const service = thisArg?.[LOCK_SERVICE_PROPERTY] as LockService | undefined;
        if (!service) {
          return Promise.reject(new LockConfigError(NO_LOCK_SERVICE(where), 'LockService'));
        }
        return service.runDecorated(method, () => Reflect.apply(fn, thisArg, args), args);
      },
    });
    for (const key of Reflect.getOwnMetadataKeys(original)) {
      Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, original), proxy);
    }
    Reflect.defineMetadata(LOCKED_METADATA, method, proxy);
    descriptor.value = proxy as unknown as typeof descriptor.value;

    // Property injection: the instance Nest builds gets the LockService of its own app, so no
    // global state is shared between apps (or test modules) in one process.
    const deps = (Reflect.getMetadata(PROPERTY_DEPS_METADATA, target.constructor) ?? []) as {
      key: string | symbol;
    }[];
    if (!deps.some((d) => d.key === LOCK_SERVICE_PROPERTY)) {
      Inject(LockService)(target, LOCK_SERVICE_PROPERTY);
    }
    return descriptor;
  };
}

/** The `@Locked` settings of a method, if it has them. @internal */
export function getLockedMethod(fn: unknown): LockedMethod | undefined {
  return typeof fn === 'function' ? Reflect.getMetadata(LOCKED_METADATA, fn) : undefined;
}
