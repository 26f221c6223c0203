import type { NumberRange } from './options/number-range';
import { MAX_TIMER_MS } from './redlock.constants';

/**
 * Error texts, one factory each, so every message says what happened and what to do. The optional
 * entry points keep theirs in their folders: `sql/sql.messages.ts`, `postgres/postgres.messages.ts`,
 * `etcd/etcd.messages.ts`, `zookeeper/zookeeper.messages.ts`, `board/board.messages.ts`.
 * @internal
 */
const list = (keys: readonly string[]): string => keys.map((k) => `"${k}"`).join(', ');
const show = (value: unknown): string => {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (Array.isArray(value)) return 'an array';
  if (value !== null && typeof value === 'object') return 'an object';
  return String(value);
};
export { list as quotedList, show as describeValue };

export const LOCK_NOT_ACQUIRED = (keys: readonly string[], waitedMs: number) =>
  `Lock ${list(keys)} is held by another caller; gave up after waiting ${Math.round(waitedMs)} ms ` +
  `(waitTimeout). Retry later, or raise waitTimeout for this call.`;

export const LOCK_BACKEND_FAILED = (
  keys: readonly string[],
  op: string,
  failures: readonly Error[],
  system = 'Redis',
) =>
  `Could not ${op} lock ${list(keys)}: ${system} failed (${failures
    .map((f) => f.message)
    .slice(0, 3)
    .join('; ')}). Check that the lock servers are reachable.`;

export const LOCK_LOST = (keys: readonly string[], reason: string) => {
  switch (reason) {
    case 'maxHold':
      return `Lock ${list(keys)} reached maxHold and is no longer renewed; stop acting on it.`;
    case 'expired':
      return `Lock ${list(keys)} expired: renewals failed until the lease ran out; another caller may hold it now.`;
    case 'shutdown':
      return `Lock ${list(keys)} was released because the application is shutting down.`;
    default:
      return `Lock ${list(keys)} was lost: a renewal found it gone or owned by another holder.`;
  }
};

export const ALL_SEGMENTS_EXHAUSTED = (keys: readonly string[], segments: number) =>
  `No segment of ${list(keys)} can serve the call: all ${segments} slices are exhausted. ` +
  `Replenish them (LockService.resetSegments makes them usable at once).`;

/**
 * What `LockInterceptor` tells a client of the application (HTTP, RPC, WebSocket, GraphQL): what
 * happened in the terms of its request. Never a lock key nor a Redis error: those stay on the
 * error object and in the logs.
 */
export const CLIENT_MESSAGES = {
  busy: 'The resource is busy; retry later.',
  exhausted: 'The resource cannot serve this request now.',
  unavailable: 'The service is temporarily unavailable.',
  badRequest: (placeholder: string | undefined) =>
    placeholder === undefined
      ? 'Invalid request: its values do not identify a resource.'
      : `Invalid request: no valid value for "${placeholder}".`,
} as const;

/** The WARN `LockInterceptor` logs when a lock error becomes a 5xx (Redis failed): the details. */
export const SERVER_ERROR_ANSWERED = (where: string, status: number, error: Error) =>
  `${where} answered ${status}: ${error.message}`;

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
  `Invalid nest-locked option "${field}": got ${show(value)}, expected ${expected}.`;

export const UNKNOWN_OPTION = (
  key: string,
  label: string,
  nearest: string | undefined,
  valid: readonly string[],
) =>
  `Unknown option "${key}" in ${label}; ` +
  (nearest === undefined ? `valid options are ${list(valid)}.` : `did you mean "${nearest}"?`);

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
  `${show(value)}. ${NOT_OBJECT_FIX[kind]}`;

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
  `${problem}. A node given as a string is ${NODE_STRINGS}.`;

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
    `is ${kind(value)} with no options of its own; pass RedisOptions as a plain object`,
  notObject: (value: unknown) => `is ${kind(value)}`,
} as const;

export const BAD_NODE_ENTRY = (field: string, problem: string) =>
  `Invalid Redis node "${field}": it ${problem}. A node is ${NODE_STRINGS}; ioredis ` +
  `RedisOptions (such as { host, port }, or Sentinel options { sentinels, name }); or an ioredis ` +
  `Redis or Cluster instance.`;

export const REDLOCK_WITHOUT_REDIS = (name: string) =>
  `@InjectRedlock('${name}'): the lock group "${name}" has no Redis behind it (another ` +
  `backend, or RedlockTestingModule's memory), so there is no Redlock instance to use. Use ` +
  `LockService, or put the group on Redis.`;

export const UNKNOWN_CLIENT = (name: string, known: readonly string[]) =>
  `Unknown lock client group "${name}". Configured groups: ${list(known)}. ` +
  `Add it to RedlockModule.forRoot({ clients: { ${name}: [...] } }) (in unit tests, to ` +
  `RedlockTestingModule.forRoot({ groups: [..., '${name}'] })) or fix the "client" option.`;

export const LOCKED_UNKNOWN_CLIENT = (where: string, name: string, known: readonly string[]) =>
  `@Locked on ${where}: ${UNKNOWN_CLIENT(name, known)}`;

export const LOCKED_NOT_A_METHOD = (where: string) =>
  `@Locked can only decorate a method; ${where} is not one. Put it on a method of a class Nest ` +
  `instantiates.`;

export const LOCKED_STATIC = (where: string) =>
  `@Locked cannot decorate the static method ${where}: it needs the instance Nest built. Make ` +
  `it an instance method of a provider or controller.`;

export const LOCKED_SEGMENTS_KEYS = (where: string) =>
  `@Locked on ${where}: "segments" needs exactly one template naming the split resource ` +
  `(e.g. 'stock:{sku}'), not several keys or a function.`;

export const BACKEND_TOGETHER = (given: readonly string[]) =>
  `RedlockModule options give ${given.join(' and ')}: give one. clients lists Redis nodes, backend ` +
  'sets the default group on another backend, groups names groups of any backend.';

export const SHARED_UNSUPPORTED = (
  where: string,
  group: string,
  kind: string,
  shared: 'read' | 'permits',
) =>
  `@Locked on ${where} asks for ${shared === 'read' ? "mode: 'read'" : 'permits > 1'} in lock group ` +
  `"${group}", whose ${kind} backend has no ${shared === 'read' ? 'shared (read) lock' : 'permits'}. ` +
  'Use the exclusive lock there, or a group on Redis, PostgreSQL, etcd or ZooKeeper.';

export const MEMORY_BACKEND_STARTED = (group: string) =>
  `Lock group "${group}" uses the memory backend: it locks within this process only, so ` +
  'instances of the app do not exclude each other. Use Redis or a database backend for several ' +
  'instances.';

export const BACKEND_UNREACHABLE_AT_START = (group: string, kind: string, reason: string) =>
  `Lock group "${group}" (${kind}) is not reachable at startup: ${reason}. Locks fail with ` +
  'LockBackendError until it answers.';

export const REDIS_UNREACHABLE_AT_START = (group: string, reason: string) =>
  `Lock group "${group}": cannot reach Redis yet (${reason}); calls fail with LockBackendError ` +
  `until it answers.`;

export const REDIS_CONNECTION_LOST = (group: string, reason: string) =>
  `Lock group "${group}": lost the connection to Redis (${reason}); reconnecting. Calls fail ` +
  `with LockBackendError, callers already waiting keep waiting, until it is back.`;

export const REDIS_CONNECTION_BACK = (group: string) =>
  `Lock group "${group}": connected to Redis again.`;

export const EVICTION_POLICY_UNSAFE = (group: string, policy: string) =>
  `Lock group "${group}": Redis has a maxmemory limit with maxmemory-policy ${policy}, which can ` +
  `evict a held lock under memory pressure (another caller could then take it; the holder ` +
  `learns at its next renewal, and fences still increase). Use maxmemory-policy noeviction on ` +
  `lock servers.`;

export const NO_LOCK_SERVICE = (where: string) =>
  `@Locked on ${where} found no LockService: the instance was not created by Nest, or ` +
  `RedlockModule.forRoot() is not imported (it is global by default; with isGlobal: false import it ` +
  `into this module). In a unit test, import RedlockTestingModule.forRoot() from ` +
  `'nest-locked/testing' (locks in memory, no Redis).`;

// Lock keys (lib/keys/). Values are described by kind, never echoed: a key error may
// become a 400 response, and the arguments are user input.

const keyTemplate = (template: string, where: string | undefined) =>
  `Lock key template ${JSON.stringify(template)}${where === undefined ? '' : ` (${where})`}`;

const kind = (value: unknown): string => {
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
  return show(value);
};

const errorText = (error: unknown) => (error instanceof Error ? error.message : kind(error));

const paramList = (names: readonly (string | undefined)[], rest: boolean) =>
  `(${names
    .map((n, i) => `${rest && i === names.length - 1 ? '...' : ''}${n ?? '<destructured>'}`)
    .join(', ')})`;

export const KEY_TEMPLATE_EMPTY = (where: string | undefined) =>
  `${keyTemplate('', where)} is empty; a key needs text, such as 'product:{id}'.`;

export const KEY_TEMPLATE_NOT_STRING = (where: string, index: number, value: unknown) =>
  `Lock key templates of ${where}: element ${index} is ${kind(value)}; every template must be a ` +
  `string such as 'product:{id}' (use the function form to build keys in code).`;

export const KEY_SOURCE_INVALID = (where: string, value: unknown) =>
  `Lock key of ${where} must be a template string, a non-empty array of templates, or a function ` +
  `returning keys; got ${kind(value)}.`;

export const KEY_TEMPLATE_UNCLOSED = (template: string, where: string | undefined, at: number) =>
  `${keyTemplate(template, where)}: the "{" at index ${at} is never closed; close the placeholder ` +
  `with "}" or write "{{" for a literal brace.`;

export const KEY_TEMPLATE_UNOPENED = (template: string, where: string | undefined, at: number) =>
  `${keyTemplate(template, where)}: the "}" at index ${at} closes nothing; write "}}" for a ` +
  `literal brace.`;

export const KEY_PLACEHOLDER_EMPTY = (template: string, where: string | undefined) =>
  `${keyTemplate(template, where)}: placeholder {} is empty; name a parameter ({id}) or an ` +
  `argument index ({0}).`;

export const KEY_PLACEHOLDER_WHITESPACE = (
  template: string,
  where: string | undefined,
  expr: string,
) =>
  `${keyTemplate(template, where)}: placeholder {${expr}} contains whitespace; write ` +
  `{${expr.replace(/\s+/g, '')}}.`;

export const KEY_PLACEHOLDER_SYNTAX = (template: string, where: string | undefined, expr: string) =>
  `${keyTemplate(template, where)}: placeholder {${expr}} is not a parameter name or argument ` +
  `index, optionally followed by a dot-separated property path ({id}, {0}, {dto.customer.id}, ` +
  `{0.items.2.sku}); build anything else with the function form.`;

export const KEY_PLACEHOLDERS_ADJACENT = (
  template: string,
  where: string | undefined,
  left: string,
  right: string,
) =>
  `${keyTemplate(template, where)}: placeholders {${left}} and {${right}} touch, so ("ab", "c") ` +
  `and ("a", "bc") would give the same key; separate them with ":", as in {${left}}:{${right}}.`;

export const KEY_PERCENT_AFTER_PLACEHOLDER = (
  template: string,
  where: string | undefined,
  placeholder: string,
) =>
  `${keyTemplate(template, where)}: the text after placeholder {${placeholder}} starts with "%", ` +
  `which encoded values contain, so two different argument lists could give the same key; start ` +
  `it with another character, such as ":".`;

export const KEY_UNKNOWN_PARAMETER = (
  template: string,
  where: string | undefined,
  expr: string,
  names: readonly (string | undefined)[],
  rest: boolean,
) =>
  `${keyTemplate(template, where)}: placeholder {${expr}} names no parameter of the method, ` +
  `whose parameters are ${paramList(names, rest)}; ` +
  (names.includes(undefined)
    ? `some names are not available (destructured parameters, or a method wrapped by another ` +
      `decorator), so use an argument index with a path ({0}, {0.customer.id}) or the function ` +
      `form (...args) => string.`
    : rest && names.length === 1
      ? `if another decorator wrapped the method before this one, put the lock decorator below ` +
        `it, or use an argument index such as {0}.`
      : `use one of these names or an argument index such as {0}.`);

export const KEY_INDEX_OUT_OF_RANGE = (
  template: string,
  where: string | undefined,
  expr: string,
  index: number,
  names: readonly (string | undefined)[],
) =>
  `${keyTemplate(template, where)}: placeholder {${expr}} reads argument ${index}, but the ` +
  `method declares ${names.length} parameter${names.length === 1 ? '' : 's'} ` +
  `${paramList(names, false)} and indices start at 0; read undeclared arguments with the ` +
  `function form.`;

export const KEY_REST_PLACEHOLDER = (template: string, where: string | undefined, expr: string) =>
  `${keyTemplate(template, where)}: placeholder {${expr}} is the rest parameter, an array; name ` +
  `one element, such as {${expr}.0}.`;

export const KEY_BAD_VALUE = (
  template: string,
  where: string | undefined,
  placeholder: string,
  value: unknown,
) =>
  `${keyTemplate(template, where)}: placeholder {${placeholder}} is ${kind(value)}; pass a ` +
  `non-empty string, number, bigint or boolean` +
  (value !== null && typeof value === 'object'
    ? `, or point the placeholder at one of its fields: {${placeholder}.<field>}.`
    : '.');

export const KEY_BROKEN_PATH = (
  template: string,
  where: string | undefined,
  placeholder: string,
  readPath: string,
  value: unknown,
) =>
  `${keyTemplate(template, where)}: placeholder {${placeholder}} cannot be read: ${readPath} is ` +
  `${kind(value)}; pass an argument that has this path, or use the function form to handle ` +
  `its absence.`;

export const KEY_PATH_THREW = (
  template: string,
  where: string | undefined,
  placeholder: string,
  readPath: string,
  error: unknown,
) =>
  `${keyTemplate(template, where)}: reading placeholder {${placeholder}} threw at ${readPath}: ` +
  `${errorText(error)} (see the cause).`;

export const KEY_TOO_LONG = (
  template: string,
  where: string | undefined,
  limit: number,
  bytes: number | undefined,
  placeholder: string | undefined,
) =>
  `${keyTemplate(template, where)}: ` +
  (bytes === undefined
    ? `the value of placeholder {${placeholder}} alone is over the ${limit}-byte key limit`
    : `the rendered key is ${bytes} bytes, over the ${limit}-byte limit` +
      (placeholder === undefined ? '' : ` (placeholder {${placeholder}} is its longest part)`)) +
  `; lock on a shorter value, such as an id or a hash.`;

export const KEY_FUNCTION_THREW = (where: string, error: unknown) =>
  `The lock key function of ${where} threw: ${errorText(error)} (see the cause). Nothing was ` +
  `locked.`;

export const KEY_FUNCTION_BAD_RESULT = (where: string, value: unknown) =>
  `The lock key function of ${where} returned ${kind(value)}; return a non-empty string or a ` +
  `non-empty array of strings` +
  (value instanceof Promise ? `, synchronously (it must not be async).` : '.');

export const RAW_KEY_INVALID = (source: string, value: unknown, limit: number) =>
  `Invalid lock key (${source}): got ${kind(value)}; a key is a non-empty string of at most ` +
  `${limit} UTF-8 bytes.`;

export const RAW_KEYS_INVALID = (where: string, value: unknown) =>
  Array.isArray(value) && value.length === 0
    ? `${where} got an empty array of lock keys: there is nothing to lock. Pass at least one ` +
      `key, such as 'product:42'.`
    : `${where} takes a lock key or a non-empty array of keys; got ${kind(value)}. Pass a ` +
      `string such as 'product:42', or an array such as ['account:A', 'account:B'].`;

export const RAW_KEY_TOO_LONG = (source: string, bytes: number, limit: number) =>
  `Invalid lock key (${source}): it is ${bytes} UTF-8 bytes, over the ${limit}-byte limit; lock on ` +
  `a shorter value, such as an id or a hash.`;

// --- engine -----------------------------------------------------------------------------------

export const SHARED_WITH_SEGMENTS = (label: string, field: 'mode' | 'permits') =>
  `${label}: ${field === 'mode' ? "mode: 'read'" : '"permits"'} cannot be combined with ` +
  `"segments" (a segmented call takes one whole slice). Use one or the other.`;

export const READ_WITH_PERMITS = (label: string, permits: number) =>
  `${label}: permits: ${permits} with mode: 'read' (read holds are already shared without ` +
  `limit). Drop "permits", or drop mode: 'read' for a semaphore of ${permits}.`;

export const PERMITS_MISMATCH = (key: string, asked: number, held: number) =>
  `Lock "${key}" asked with permits: ${asked}, but its current holders use permits: ${held}. ` +
  `Every holder of a key must use the same number of permits.`;

export const MODE_MISMATCH = (key: string, asked: string, held: string) =>
  `Lock "${key}" asked as ${asked}, but its current holders hold it as ${held}.`;

export const READ_TO_WRITE = (key: string) =>
  `Lock "${key}": this call holds it for reading and asked for the write lock of the same key; ` +
  `upgrading a read hold would deadlock with other readers. Take the write lock first (a ` +
  `write holder may enter read holds of its key), or release the read hold.`;

export const ACQUIRE_TAKES_NO_SEGMENTS =
  'LockService.acquire does not take "segments"; use using() or @Locked for segmented locks.';

export const REPLICAS_DID_NOT_ACK = (acked: number, wanted: number, timeout: number) =>
  `only ${acked} of ${wanted} replicas acknowledged the lock within ${timeout} ms ` +
  `(replicaAcks / replicaAckTimeout)`;

export const REPLICAS_NOT_ANSWERING = (wanted: number, timeout: number) =>
  `the replicas did not acknowledge the last lock within ${timeout} ms (replicaAcks: ${wanted}); ` +
  `until they do, one lock at a time is tried and the others fail at once`;

/** Why a wait ends when the application shuts down. */
export const SHUTTING_DOWN = 'the application is shutting down';

// --- nest-locked/testing --------------------------------------------------------------------

export const TESTING_OPTIONS_LABEL = 'RedlockTestingModule.forRoot options';

export const TESTING_EXPECTED = {
  groups: "a non-empty array of lock group names, such as ['default', 'orders']",
  times: 'an integer >= 1, or Infinity (every call until reset())',
  retryAfterMs: 'a number of ms >= 0',
  cause: 'an Error',
} as const;

export const TESTING_CLIENTS =
  `"clients" has no effect in ${TESTING_OPTIONS_LABEL}: RedlockTestingModule keeps its locks in ` +
  `memory and connects to nothing. Name the lock groups your code uses instead: ` +
  `groups: ['default', 'orders'].`;

/** The cause of the LockBackendError every call gets while the test backend is down. */
export const TESTING_BACKEND_DOWN =
  'the lock backend is down (RedlockTestingController.down(); restore() brings it back)';

export const TESTING_NOTHING_TO_LOSE = (key: string) =>
  `RedlockTestingController.lose(${JSON.stringify(key)}): nobody holds this lock right now, so ` +
  `there is nothing to lose. Call it while the locked call runs (a segmented call holds a ` +
  `slice, "<key>:seg:<n>": LockContext.current().keys names it).`;

// --- observability --------------------------------------------------------------------------

export const TELEMETRY_NEEDS_OTEL =
  'The nest-locked option telemetry: true needs @opentelemetry/api: install it ' +
  "(npm install @opentelemetry/api), or leave telemetry at 'auto' (records when it is installed " +
  'and an OpenTelemetry SDK is registered) or set it to false.';

export const LOCK_EVENT_LISTENER_FAILED = (event: string, error: unknown) =>
  `A listener of the lock event "${event}" threw; the lock call goes on: ${
    error instanceof Error ? error.message : String(error)
  }`;

export const UNKNOWN_LOCK_EVENT = (event: string, known: readonly string[]) =>
  `LockService.on("${event}"): no such lock event; the events are ${list(known)}.`;

export const HEALTH_PING_TIMED_OUT = (ms: number) => `no answer to PING within ${ms} ms`;

// --- compile-time messages of @Locked (types; TypeScript shows them in its errors) -------------

export type TYPE_TEMPLATE_UNCLOSED = 'a "{" is never closed (write "{{" for a literal brace)';
export type TYPE_TEMPLATE_UNOPENED = 'a "}" closes nothing (write "}}" for a literal brace)';
export type TYPE_PLACEHOLDER_EMPTY = 'placeholder {} is empty; name a parameter or an index';
export type TYPE_PLACEHOLDERS_ADJACENT =
  'two placeholders touch; separate them with text such as ":"';
export type TYPE_PLACEHOLDER_INDEX_PAST<
  Expr extends string,
  Index extends string,
  Count extends number,
> = `{${Expr}} reads argument ${Index}, but the method has ${Count} parameters (indices start at 0)`;
export type TYPE_PLACEHOLDER_NO_PROPERTY<
  Expr extends string,
  Read extends string,
  Property extends string,
> = `{${Expr}}: argument ${Read} has no property "${Property}"`;
export type TYPE_PLACEHOLDER_BAD_VALUE<Expr extends string> =
  `{${Expr}} is not a string, number, bigint or boolean; a key cannot be made of an object`;
export type TYPE_NOT_ASYNC =
  '@Locked needs a method that returns a Promise or an Observable: declare it async (it returns a Promise once decorated)';
export type TYPE_SKIP_RESOLVES_UNDEFINED =
  "@Locked with onBusy: 'skip' resolves undefined when the lock is busy: declare the method's result as Promise<T | undefined>";
export type TYPE_KEY_FUNCTION_PARAMETERS =
  "@Locked key function: its parameters do not match the method's";
export type TYPE_UNKNOWN_OPTION<Key extends PropertyKey> =
  `@Locked: unknown option "${Key & string}" (see LockedOptions)`;

// --- corrections of issue 26: call input, first use, credentials ------------------------------

export const USING_NEEDS_FUNCTION = (where: string, value: unknown) =>
  `${where}: its second argument (fn) must be the function to run under the lock; got ` +
  `${kind(value)}. Pass it as in locks.using('product:42', async (lock) => { ... }).`;

export const RAW_KEY_LONE_SURROGATE = (source: string) =>
  `Invalid lock key (${source}): it holds a lone surrogate (half of a UTF-16 pair), which Redis ` +
  `would store as U+FFFD, the same as any other lone surrogate. Lock on well-formed text ` +
  `(String.prototype.toWellFormed()), or use a key template, which encodes such values.`;

export const APP_NOT_INITIALISED = (group: string) =>
  `Lock group "${group}" is not connected: the Nest application was not initialised; call ` +
  `app.init() (or app.listen(), or init() on a testing module) before taking locks. ` +
  `RedlockModule opens its connections when the application initialises.`;

export type TYPE_KEY_FUNCTION_THIS =
  "@Locked key function: its 'this' parameter is not the class of the decorated method";
// ---- Engine policies (bench switch of the fast paths)
export const UNKNOWN_POLICY = (name: string, known: readonly string[]) =>
  `NEST_LOCKED_POLICIES_OFF names "${name}", which is no fast path: ` +
  `use "all" or some of ${known.join(', ')}, comma-separated.`;
