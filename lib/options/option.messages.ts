import { MAX_TIMER_MS } from '../redlock.constants';
import type { NumberRange } from './number-range';
import { describeKind, describeValue, quotedList, sentence } from '../redlock.messages';

/**
 * The messages of option validation (`options/`): what each option takes and what is wrong with
 * a value. `api/` and `testing/` word their own option errors with `BAD_OPTION` too.
 */

const UP_TO_MAX_TIMER = `${MAX_TIMER_MS} (2^31-1 ms, the longest Node.js timer)`;

/**
 * The "expected ..." of `BAD_OPTION` for a number option, worded from the range its check
 * enforces (`RANGES` in options/redlock-options.ts), so the two never disagree.
 */
export function EXPECTED_NUMBER(r: NumberRange): string {
  const integer = r.integer ? 'an integer' : 'a number';
  const kind = r.noun ?? (r.ms ? `${integer} ${r.integer ? 'number of ms' : 'of ms'}` : integer);
  const min = `${r.min}${r.minMeans === undefined ? '' : ` (${r.minMeans})`}`;
  const max = r.max === MAX_TIMER_MS ? UP_TO_MAX_TIMER : String(r.max);
  const range =
    r.max === undefined
      ? `${r.aboveMin ? '>' : '>='} ${min}`
      : r.aboveMin
        ? `> ${min} up to ${max}`
        : `from ${min} to ${r.belowMax ? 'less than ' : ''}${max}`;
  return `${kind} ${range}${r.orInfinity ? ', or Infinity' : ''}${r.means ? ` (${r.means})` : ''}`;
}

/** What each option that is not a number takes: the "expected ..." of `BAD_OPTION`. */
export const EXPECTED = {
  watchdog: 'a boolean',
  onBusy: "'throw' or 'skip'",
  mode: "'read' or 'write'",
  client: 'the name of a client group',
  signal: 'an AbortSignal (the signal of an AbortController)',
  keyPrefix: 'a string',
  interceptor: 'a boolean',
  telemetry: "true, false or 'auto'",
  lockOrder: "'off', 'warn' or 'throw'",
  lockClass: "a class name ('account:{id}') or an array of them, one per key",
  nestedInOrder: 'a boolean',
  holderReportAfter: 'a number of ms (0 is off)',
  clients: (instance: boolean) =>
    'an array of Redis nodes or a record of named groups' +
    (instance
      ? '; wrap a single instance in an array: clients: [redis]'
      : ' (leave clients out to use REDIS_URL, else redis://127.0.0.1:6379)'),
  someGroup: 'at least one client group',
  groups:
    "a record of named groups: { default: { backend: postgresBackend(...) }, jobs: { clients: ['redis://...'] } }",
  namedGroup:
    "an object with either clients (Redis nodes) or backend ('memory' or a backend factory's result)",
  backend:
    "'memory' or what a backend factory returns (postgresBackend(...) from 'nest-locked/postgres', mysqlBackend, etcdBackend, zookeeperBackend)",
  group: 'a non-empty array of Redis nodes (URL, options or instance)',
  host: 'a host name or IP address',
  path: 'the path of a Unix socket',
  sentinels: 'a non-empty array of sentinels ({ host, port })',
  sentinelName: "the name of the master the sentinels watch ('mymaster')",
} as const;

export const BAD_OPTION = (field: string, value: unknown, expected: string) =>
  `Invalid nest-locked option "${field}": got ${describeValue(value)}, expected ${expected}.`;

export const UNKNOWN_OPTION = (
  key: string,
  label: string,
  nearest: string | undefined,
  valid: readonly string[],
) =>
  `Unknown option "${key}" in ${label}; ` +
  (nearest === undefined
    ? `valid options are ${quotedList(valid)}.`
    : `did you mean "${nearest}"?`);

/** How messages name an options object (a call's are named by their caller). */
export const OPTIONS_LABEL = {
  forRoot: 'RedlockModule.forRoot options',
  forRootAsync: 'the options returned by the RedlockModule.forRootAsync factory',
  decorator: (where: string) => `the options of ${where}`,
} as const;

const NOT_OBJECT_FIX = {
  call: "Leave the argument out to use the module's options.",
  decorator: "Leave them out to use the module's options.",
  forRoot: 'Pass an object, or nothing for the defaults.',
  forRootAsync: 'Return the options from the factory (a factory without return gives undefined).',
} as const;

export const OPTIONS_NOT_OBJECT = (
  label: string,
  value: unknown,
  kind: keyof typeof NOT_OBJECT_FIX,
) =>
  `${label[0].toUpperCase()}${label.slice(1)} must be an object, such as { ttl: 10_000 }; got ` +
  `${describeValue(value)}. ${NOT_OBJECT_FIX[kind]}`;

export const OPTION_PER_CALL = (key: string, label: string, onDecorator: boolean) =>
  `"${key}" is a per-call option and has no effect in ${label}; set it on ` +
  `${onDecorator ? `@Locked(keys, { ${key} }) or ` : ''}LockService.using(keys, fn, { ${key} }).`;

export const OPTION_MODULE_ONLY = (key: string, label: string) =>
  `"${key}" is a module option and cannot be set in ${label}; set it in ` +
  `RedlockModule.forRoot({ ${key} }) (or in the options your forRootAsync factory returns).`;

export const DECORATOR_SIGNAL = (label: string) =>
  `"signal" cannot be set in ${label}: a decorator's options are fixed when the class is ` +
  `defined, so they cannot carry the AbortSignal of one call. Where the signal exists, lock ` +
  `with LockService.using(keys, fn, { signal }) or LockService.acquire(keys, { signal }).`;

export const FACTORY_IS_GLOBAL = (label: string) =>
  `"isGlobal" has no effect in ${label}: Nest reads it before the factory runs. Pass it beside ` +
  `the factory: RedlockModule.forRootAsync({ isGlobal: false, useFactory }).`;

const NODE_STRINGS =
  'redis://[user:password@]host[:port][/db] (rediss:// for TLS), host[:port], a port number, or ' +
  'the path of a Unix socket (/run/redis/redis.sock)';

/** Why a string does not name the Redis node ioredis would reach (completes "<url> ..."). */
export const NODE_URL_PROBLEM = {
  empty: 'is empty',
  spaces: 'has spaces or line breaks around it; remove them',
  port: (expected: string) => `is a port, but not ${expected}`,
  portZero: (expected: string) => `has port 0; expected ${expected}`,
  unparsable: 'is not a Redis URL ioredis can parse (check the host and the port)',
  noHost: 'names no host (an unset variable in the URL?)',
  capitals:
    'writes "rediss://" in capitals; write it in lower case (ioredis turns TLS on only for a ' +
    'lower-case "rediss://")',
  badDb: 'has a database that is not a number (such as /0 or ?db=0)',
  unixScheme: (path: string) => `is a unix:// URL; give the socket's path alone: ${path}`,
  otherScheme: (scheme: string) => `uses "${scheme}://", which is not a Redis scheme`,
  pathWithoutScheme: (url: string) =>
    `has no scheme, so ioredis would take its path for a Unix socket; to choose a database ` +
    `write redis://${url}`,
} as const;

export const BAD_NODE_URL = (field: string, url: string, problem: string, fromEnv: boolean) =>
  `Invalid Redis node "${field}"${fromEnv ? ' (from REDIS_URL)' : ''}: ${JSON.stringify(url)} ` +
  `${sentence(problem)} A node given as a string is ${NODE_STRINGS}.`;

/** Why an object is not a Redis node (completes "it ..."). */
export const NODE_ENTRY_PROBLEM = {
  function: 'is a function; pass the client or the options it makes',
  array:
    "is an array; list a group's nodes directly in its array (clients: ['redis://a', " +
    "'redis://b']), not nested",
  promise: 'is a Promise; await it (in a forRootAsync factory) and pass what it resolves to',
  url: (href: string) => `is a URL object; pass its string (url.href): ${JSON.stringify(href)}`,
  otherClient:
    'is a client of another library (it has no evalsha); nest-locked talks to Redis through ' +
    'ioredis',
  noOptions: (value: unknown) =>
    `is ${describeKind(value)} with no options of its own; pass RedisOptions as a plain object`,
  notObject: (value: unknown) => `is ${describeKind(value)}`,
} as const;

export const BAD_NODE_ENTRY = (field: string, problem: string) =>
  `Invalid Redis node "${field}": it ${sentence(problem)} A node is ${NODE_STRINGS}; ioredis ` +
  `RedisOptions (such as { host, port }, or Sentinel options { sentinels, name }); or an ioredis ` +
  `Redis or Cluster instance.`;

export const BACKEND_TOGETHER = (given: readonly string[]) =>
  `RedlockModule options give ${given.join(' and ')}: give one. clients lists Redis nodes, backend ` +
  'sets the default group on another backend, groups names groups of any backend.';

export const SHARED_WITH_SEGMENTS = (label: string, field: 'mode' | 'permits') =>
  `${label}: ${field === 'mode' ? "mode: 'read'" : '"permits"'} cannot be combined with ` +
  `"segments" (a segmented call takes one whole slice). Use one or the other.`;

export const READ_WITH_PERMITS = (label: string, permits: number) =>
  `${label}: permits: ${permits} with mode: 'read' (read holds are already shared without ` +
  `limit). Drop "permits", or drop mode: 'read' for a semaphore of ${permits}.`;
