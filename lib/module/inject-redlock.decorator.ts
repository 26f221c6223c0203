import { Inject } from '@nestjs/common';
import { DEFAULT_CLIENT } from '../redlock.constants';

const requested = new Set<string>([DEFAULT_CLIENT]);

/**
 * The injection token of a group's `Redlock` instance.
 * @publicApi
 */
export function getRedlockToken(name: string = DEFAULT_CLIENT): string {
  return `nest-locked:Redlock(${name})`;
}

/** Group names asked for by `@InjectRedlock`, so the module can provide each token. @internal */
export function requestedRedlockNames(): string[] {
  return [...requested];
}

/**
 * Injects the underlying `Redlock` instance (node-redlock 5) of a client group: the escape hatch
 * for anything the decorator does not cover. Locks taken through it bypass nest-locked's
 * fencing, reentrancy and waiting engine.
 *
 * @example
 * ```ts
 * import { InjectRedlock, type Redlock } from 'nest-locked';
 *
 * constructor(@InjectRedlock() private readonly redlock: Redlock) {}
 * ```
 * @publicApi
 */
export function InjectRedlock(
  name: string = DEFAULT_CLIENT,
): ParameterDecorator & PropertyDecorator {
  requested.add(name);
  return Inject(getRedlockToken(name));
}
