/**
 * What every area's messages share: how a message names lock keys and describes a value, and the
 * few messages used by areas that do not depend on each other. Each area's own messages live in
 * its folder, beside the checks that throw them: `api/api.messages.ts`, `board/board.messages.ts`,
 * `core/core.messages.ts`, `errors/error.messages.ts`, `etcd/etcd.messages.ts`,
 * `keys/key.messages.ts`, `memory/memory.messages.ts`, `module/module.messages.ts`,
 * `options/option.messages.ts`, `postgres/postgres.messages.ts`, `redis/redis.messages.ts`,
 * `sql/sql.messages.ts`, `testing/testing.messages.ts`, `zookeeper/zookeeper.messages.ts`. A new
 * message goes in the file of the folder that uses it; here only when folders that must not import
 * each other both use it. This file imports nothing, so any folder (an optional backend's entry
 * included) may import it.
 * @internal
 */

/**
 * `text` as the end of a sentence: a period added unless it already ends with one (or with a
 * question or exclamation mark), as a driver's error message often does.
 */
export const sentence = (text: string): string => {
  const trimmed = text.trimEnd();
  return /[.?!]$/.test(trimmed) ? trimmed : `${trimmed}.`;
};

/** Lock keys (or option names) as a message lists them: `"a", "b"`. */
export const quotedList = (keys: readonly string[]): string => keys.map((k) => `"${k}"`).join(', ');

/** A value as a message shows it: a string quoted, an object or a function by its kind only. */
export const describeValue = (value: unknown): string => {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (Array.isArray(value)) return 'an array';
  if (value !== null && typeof value === 'object') return 'an object';
  return String(value);
};

/**
 * What kind of value a message names, never the value itself (a string is "a string"): the
 * value may be user input, and a key error may become a 400 response.
 */
export const describeKind = (value: unknown): string => {
  if (value === '') return 'an empty string';
  if (typeof value === 'symbol') return 'a symbol';
  if (Array.isArray(value)) return value.length === 0 ? 'an empty array' : 'an array';
  if (value instanceof Promise) return 'a Promise';
  if (value !== null && typeof value === 'object') {
    let name: unknown;
    try {
      name = (value as { constructor?: { name?: unknown } }).constructor?.name;
    } catch {
      name = undefined; // a hostile Proxy or getter must not replace the key error
    }
    return typeof name === 'string' && name !== '' && name !== 'Object'
      ? `an object (${name})`
      : 'an object';
  }
  if (typeof value === 'string') return 'a string';
  return describeValue(value);
};

/** Why a health check of a node failed: `redis/` (PING) and `etcd/` (status) both word it. */
export const HEALTH_PING_TIMED_OUT = (ms: number) => `no answer to PING within ${ms} ms`;
