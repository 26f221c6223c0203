import { LockKeyError } from '../errors';
import {
  RAW_KEY_INVALID,
  RAW_KEY_LONE_SURROGATE,
  RAW_KEY_TOO_LONG,
  RAW_KEYS_INVALID,
} from './key.messages';
import { MAX_KEY_BYTES, utf8Length } from './key-length';

/**
 * Checks a key built by user code (the function form, `LockService.using` and friends). Such keys
 * are not encoded, since their author chose their structure, but an empty or oversized key is
 * always a bug, best reported before anything is sent to Redis.
 *
 * @param source who supplied the key, for the message (`LockService.using`).
 * @throws LockKeyError with `template` set to `source`.
 */
export function assertRawKey(key: unknown, source: string): string {
  return rawKey(key, source, source);
}

/**
 * Checks the keys a caller passes to `LockService.using` or `acquire`: a key, or a non-empty
 * array of keys, each checked as {@link assertRawKey} does. Anything else (a number, `null`, an
 * empty array) would otherwise fail deep in the lock layer with a bare TypeError, or lock nothing.
 *
 * @param where the method, named in the message and set as the error's `template`.
 * @returns a fresh array, in the order given (the lock layer sorts and dedupes).
 * @throws LockKeyError saying what to pass instead.
 * @example
 * ```ts
 * rawKeys(['account:B', 'account:A'], 'LockService.using'); // ['account:B', 'account:A']
 * rawKeys([], 'LockService.using'); // throws LockKeyError: nothing to lock
 * ```
 */
export function rawKeys(keys: unknown, where: string): string[] {
  return rawKeyList(keys, where, where, (value) => RAW_KEYS_INVALID(where, value));
}

/**
 * A key or a non-empty array of keys, each checked by {@link rawKey} (an element is named by its
 * index); `invalid` words the error for anything else.
 */
export function rawKeyList(
  keys: unknown,
  source: string,
  template: string,
  invalid: (value: unknown) => string,
): string[] {
  if (typeof keys === 'string') return [rawKey(keys, source, template)];
  if (Array.isArray(keys) && keys.length > 0) {
    const list: readonly unknown[] = keys;
    const checked = new Array<string>(list.length);
    for (let i = 0; i < list.length; i++) {
      checked[i] = rawKey(list[i], `${source}, element ${i}`, template);
    }
    return checked;
  }
  throw new LockKeyError(invalid(keys), template);
}

/** {@link assertRawKey} with the error's `template` apart from the `source` named in the message. */
export function rawKey(key: unknown, source: string, template: string): string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new LockKeyError(RAW_KEY_INVALID(source, key, MAX_KEY_BYTES), template);
  }
  // A UTF-16 code unit is at most 3 UTF-8 bytes, and at least 1.
  if (key.length * 3 > MAX_KEY_BYTES) {
    const bytes = utf8Length(key);
    if (bytes > MAX_KEY_BYTES) {
      throw new LockKeyError(RAW_KEY_TOO_LONG(source, bytes, MAX_KEY_BYTES), template);
    }
  }
  // Redis would store every lone surrogate as U+FFFD: two different keys, one lock. Raw keys
  // are not encoded (their author chose them), so such a key is refused.
  if (!(key as string & WellFormed).isWellFormed()) {
    throw new LockKeyError(RAW_KEY_LONE_SURROGATE(source), template);
  }
  return key;
}

/** `String.prototype.isWellFormed` (Node 20; not in the ES2022 lib this package compiles to). */
interface WellFormed {
  isWellFormed(): boolean;
}
