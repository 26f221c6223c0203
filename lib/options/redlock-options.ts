import { LockConfigError } from '../errors';
import type {
  LockBackendDefinition,
  LockBehaviourOptions,
  LockCallOptions,
  LockedOptions,
  RedlockClientEntry,
  RedlockModuleExtras,
  RedlockModuleOptions,
} from '../interfaces';
import { loadRedisDriver } from '../redis/protocol/redis-driver';
import { isRedisInstance } from '../redis/protocol/redis-node';
import { memoryBackend } from '../memory/memory-backend';
import {
  DEFAULT_CLIENT,
  DEFAULT_OPTIONS,
  DEFAULT_REDIS_URL,
  MAX_TIMER_MS,
} from '../redlock.constants';
import {
  BACKEND_TOGETHER,
  BAD_NODE_ENTRY,
  BAD_NODE_URL,
  BAD_OPTION,
  DECORATOR_SIGNAL,
  EXPECTED,
  EXPECTED_NUMBER,
  FACTORY_IS_GLOBAL,
  NODE_ENTRY_PROBLEM,
  NODE_URL_PROBLEM,
  OPTION_MODULE_ONLY,
  OPTION_PER_CALL,
  OPTIONS_LABEL,
  OPTIONS_NOT_OBJECT,
  READ_WITH_PERMITS,
  SHARED_WITH_SEGMENTS,
  UNKNOWN_OPTION,
} from './option.messages';
import { inRange, type NumberRange } from './number-range';

/** Module options after validation, with every default applied. @internal */
export interface ResolvedRedlockOptions extends Required<
  Omit<RedlockModuleOptions, 'clients' | 'backend' | 'groups'>
> {
  /** The Redis groups: their nodes. */
  groups: Readonly<Record<string, readonly RedlockClientEntry[]>>;
  /** The groups of other backends (`'memory'` resolved to its definition). */
  backends: Readonly<Record<string, LockBackendDefinition>>;
}

/** Where module options came from: `forRoot(options)` or a `forRootAsync` factory. @internal */
export type ModuleOptionsOrigin = 'forRoot' | 'forRootAsync';

// The keys each kind of options object takes. `satisfies` keeps each list equal to its
// interface: a field added there and not here (or the reverse) is a compile error.
const BEHAVIOUR_KEYS = {
  ttl: true,
  watchdog: true,
  maxHold: true,
  waitTimeout: true,
  replicaAcks: true,
  replicaAckTimeout: true,
} as const satisfies Record<keyof LockBehaviourOptions, true>;
const LOCKED_KEYS = Object.keys({
  client: true,
  ...BEHAVIOUR_KEYS,
  segments: true,
  onBusy: true,
  minHold: true,
  mode: true,
  permits: true,
  lockClass: true,
  nestedInOrder: true,
} satisfies Record<keyof LockedOptions, true>);
const CALL_KEYS = [
  ...LOCKED_KEYS,
  ...Object.keys({ signal: true } satisfies Record<
    Exclude<keyof LockCallOptions, keyof LockedOptions>,
    true
  >),
];
/** The keys of `RedlockModuleOptions`. @internal */
export const MODULE_KEYS = Object.keys({
  clients: true,
  backend: true,
  groups: true,
  keyPrefix: true,
  ...BEHAVIOUR_KEYS,
  busyStatus: true,
  interceptor: true,
  driftFactor: true,
  localHandoffs: true,
  commandTimeout: true,
  telemetry: true,
  lockOrder: true,
  holderReportAfter: true,
} satisfies Record<keyof RedlockModuleOptions, true>);
const EXTRA_KEYS = Object.keys({ isGlobal: true } satisfies Record<
  keyof RedlockModuleExtras,
  true
>);

/** One options object being checked: how messages name it and which keys it takes. */
interface OptionsSite {
  /** Names the object in messages: `LockService.using options`. */
  readonly label: string;
  /** Prefix of `LockConfigError.field` (`''`: the module's fields go by their bare names). */
  readonly field: string;
  readonly keys: readonly string[];
  /** Why a key that is valid elsewhere is refused here, and where it goes. */
  readonly elsewhere: (key: string) => string | undefined;
  /** Which options these are, for the fix of a value that is not an object. */
  readonly kind: 'call' | 'decorator' | ModuleOptionsOrigin;
}

const fieldOf = (site: OptionsSite, name: string) => (site.field ? `${site.field}.${name}` : name);

function fail(field: string, value: unknown, expected: string): never {
  throw new LockConfigError(BAD_OPTION(field, value, expected), field);
}

/**
 * The range each number option takes, written once: its check (`inRange`) and the "expected
 * ..." of its error (`EXPECTED_NUMBER`) both read it. A duration stops at MAX_TIMER_MS: a longer
 * timer would fire after 1 ms.
 * @internal
 */
export const RANGES = {
  // Below 10 ms a lease is gone before a round trip to Redis comes back.
  ttl: { integer: true, ms: true, min: 10, max: MAX_TIMER_MS },
  maxHold: { ms: true, min: 0, aboveMin: true, max: MAX_TIMER_MS, orInfinity: true },
  waitTimeout: { ms: true, min: 0, minMeans: 'tries once', max: MAX_TIMER_MS },
  replicaAcks: { integer: true, min: 0, means: 'replicas that must acknowledge; 0 is off' },
  replicaAckTimeout: { integer: true, ms: true, min: 1, max: MAX_TIMER_MS },
  segments: { integer: true, min: 1, max: 1024 },
  minHold: { ms: true, min: 0, minMeans: 'off', max: MAX_TIMER_MS },
  permits: { integer: 'safe', min: 1, means: 'how many holders the key admits at once' },
  busyStatus: { integer: true, noun: 'an HTTP error status', min: 400, max: 599 },
  // Redlock's clock drift allowance: at 0.5 half of every lease would be spent on it.
  driftFactor: { min: 0, max: 0.5, belowMax: true },
  localHandoffs: { integer: true, min: 0 },
  commandTimeout: { ms: true, min: 1, max: MAX_TIMER_MS },
  port: { integer: true, noun: 'a port number', min: 1, max: 65535 },
  holderReportAfter: { ms: true, min: 0, minMeans: 'off', max: MAX_TIMER_MS },
} as const satisfies Record<string, NumberRange>;

/** Fails with the range's own "expected ..." unless `value` is in it. */
function checkRange(field: string, value: unknown, range: NumberRange): void {
  if (!inRange(range, value)) fail(field, value, EXPECTED_NUMBER(range));
}

/**
 * The options object itself: an object (not null, an array or a function) whose every key the
 * site takes. A misspelt key would otherwise be ignored in silence and its default used.
 */
function checkShape(options: unknown, site: OptionsSite): asserts options is object {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new LockConfigError(
      OPTIONS_NOT_OBJECT(site.label, options, site.kind),
      site.field || 'options',
    );
  }
  for (const key of Object.keys(options)) {
    if (site.keys.includes(key)) continue;
    let nearest = nearestName(key, site.keys);
    let elsewhere = site.elsewhere(key);
    // A key valid elsewhere is sent there unless it is one edit from a key here (client for
    // clients): minHold is a per-call option, not a misspelt maxHold.
    if (nearest !== undefined && elsewhere !== undefined) {
      if (editDistance(key.toLowerCase(), nearest.toLowerCase()) > 1) nearest = undefined;
      else elsewhere = undefined;
    }
    throw new LockConfigError(
      elsewhere ?? UNKNOWN_OPTION(key, site.label, nearest, site.keys),
      fieldOf(site, key),
    );
  }
}

/**
 * The valid name a misspelt one was most likely meant to be: the closest by edit distance
 * (ignoring case), if close enough to be a typo, or one that contains it or is contained in it
 * (`timeout` -> `waitTimeout`).
 * @internal
 */
export function nearestName(name: string, candidates: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const c = candidate.toLowerCase();
    const distance = editDistance(lower, c);
    const typo = distance <= Math.max(1, Math.floor(Math.max(lower.length, c.length) / 3));
    const part = Math.min(lower.length, c.length) >= 3 && (c.includes(lower) || lower.includes(c));
    if ((typo || part) && distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Levenshtein distance, with a swap of two neighbours counting as one edit (`tlt` -> `ttl`). */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/** The lease fields, shared by the module and by every call. */
function checkBehaviour(options: LockBehaviourOptions, field: (name: string) => string): void {
  if (options.watchdog !== undefined && typeof options.watchdog !== 'boolean')
    fail(field('watchdog'), options.watchdog, EXPECTED.watchdog);
  for (const name of ['ttl', 'maxHold', 'waitTimeout', 'replicaAcks', 'replicaAckTimeout'] as const)
    if (options[name] !== undefined) checkRange(field(name), options[name], RANGES[name]);
}

/**
 * Validates the options of one call: `@Locked` (`kind: 'decorator'`, which refuses `signal`)
 * or `LockService.using` / `acquire`. `prefix` names them in messages and fields
 * (`'LockService.using options'`, `'@Locked on OrderService.pay'`).
 * @internal
 */
export function validateBehaviour(
  options: unknown,
  prefix: string,
  kind: 'call' | 'decorator' = 'call',
): asserts options is LockCallOptions {
  const decorator = kind === 'decorator';
  const where: OptionsSite = {
    kind,
    label: decorator ? OPTIONS_LABEL.decorator(prefix) : prefix,
    field: prefix,
    keys: decorator ? LOCKED_KEYS : CALL_KEYS,
    elsewhere: (key) =>
      key === 'signal'
        ? DECORATOR_SIGNAL(OPTIONS_LABEL.decorator(prefix))
        : MODULE_KEYS.includes(key)
          ? OPTION_MODULE_ONLY(key, where.label)
          : undefined,
  };
  checkShape(options, where);
  const f = (name: string) => fieldOf(where, name);
  checkBehaviour(options, f);
  const { segments, client, onBusy, signal, minHold, mode, permits, lockClass, nestedInOrder } =
    options as LockCallOptions;
  const isClass = (c: unknown) => typeof c === 'string' && c !== '';
  if (
    lockClass !== undefined &&
    !isClass(lockClass) &&
    !(Array.isArray(lockClass) && lockClass.length > 0 && lockClass.every(isClass))
  )
    fail(f('lockClass'), lockClass, EXPECTED.lockClass);
  if (nestedInOrder !== undefined && typeof nestedInOrder !== 'boolean')
    fail(f('nestedInOrder'), nestedInOrder, EXPECTED.nestedInOrder);
  if (segments !== undefined) checkRange(f('segments'), segments, RANGES.segments);
  if (onBusy !== undefined && onBusy !== 'throw' && onBusy !== 'skip')
    fail(f('onBusy'), onBusy, EXPECTED.onBusy);
  if (minHold !== undefined) checkRange(f('minHold'), minHold, RANGES.minHold);
  if (client !== undefined && (typeof client !== 'string' || client === ''))
    fail(f('client'), client, EXPECTED.client);
  if (mode !== undefined && mode !== 'read' && mode !== 'write')
    fail(f('mode'), mode, EXPECTED.mode);
  if (permits !== undefined) checkRange(f('permits'), permits, RANGES.permits);
  // permits: 1 is the exclusive lock a segmented call takes anyway.
  if (segments !== undefined && (mode === 'read' || (permits !== undefined && permits !== 1))) {
    const field = mode === 'read' ? 'mode' : 'permits';
    throw new LockConfigError(SHARED_WITH_SEGMENTS(prefix, field), f(field));
  }
  if (mode === 'read' && permits !== undefined && permits > 1)
    throw new LockConfigError(READ_WITH_PERMITS(prefix, permits), f('permits'));
  // The engine hands it to AbortSignal.any and addEventListener, which need a real one.
  if (signal !== undefined && !(signal instanceof AbortSignal))
    fail(f('signal'), signal, EXPECTED.signal);
}

/**
 * Validates module options and merges the defaults. Runs once, in the options provider, so bad
 * options fail startup with a `LockConfigError` naming the field. `origin` says where they came
 * from: `forRoot` (whose `isGlobal` the module definition already read) or a `forRootAsync`
 * factory (whose result must not carry `isGlobal`: Nest reads it before the factory runs).
 * @internal
 */
export function resolveRedlockOptions(
  options?: unknown,
  origin: ModuleOptionsOrigin = 'forRoot',
): ResolvedRedlockOptions {
  const fromFactory = origin === 'forRootAsync';
  const site: OptionsSite = {
    kind: origin,
    label: OPTIONS_LABEL[origin],
    field: '',
    keys: fromFactory ? MODULE_KEYS : [...MODULE_KEYS, ...EXTRA_KEYS],
    elsewhere: (key) =>
      EXTRA_KEYS.includes(key)
        ? FACTORY_IS_GLOBAL(site.label)
        : CALL_KEYS.includes(key)
          ? OPTION_PER_CALL(key, site.label, LOCKED_KEYS.includes(key))
          : undefined,
  };
  const input = options === undefined && !fromFactory ? {} : options;
  checkShape(input, site);
  const {
    clients: given,
    backend,
    groups: named,
    isGlobal: _extra,
    ...own
  } = input as RedlockModuleOptions & RedlockModuleExtras;
  checkBehaviour(own, (name) => name);
  const o = { ...DEFAULT_OPTIONS, ...stripUndefined(own) };
  if (typeof o.keyPrefix !== 'string') fail('keyPrefix', o.keyPrefix, EXPECTED.keyPrefix);
  for (const name of ['busyStatus', 'driftFactor', 'localHandoffs', 'commandTimeout'] as const)
    checkRange(name, o[name], RANGES[name]);
  if (typeof o.interceptor !== 'boolean') fail('interceptor', o.interceptor, EXPECTED.interceptor);
  if (typeof o.telemetry !== 'boolean' && o.telemetry !== 'auto')
    fail('telemetry', o.telemetry, EXPECTED.telemetry);
  if (!['off', 'warn', 'throw'].includes(o.lockOrder as string))
    fail('lockOrder', o.lockOrder, EXPECTED.lockOrder);
  checkRange('holderReportAfter', o.holderReportAfter, RANGES.holderReportAfter);

  const { groups, backends } = resolveGroups(given, backend, named);
  return Object.freeze({
    ...o,
    groups: Object.freeze(groups),
    backends: Object.freeze(backends),
  });
}

type RedisGroups = Record<string, readonly RedlockClientEntry[]>;

/**
 * The groups, from exactly one of `clients` (Redis only), `backend` (the default group on
 * another backend) and `groups` (named groups of any backend).
 */
function resolveGroups(
  clients: unknown,
  backend: unknown,
  named: unknown,
): { groups: RedisGroups; backends: Record<string, LockBackendDefinition> } {
  const given = (['clients', 'backend', 'groups'] as const).filter(
    (_, i) => [clients, backend, named][i] !== undefined,
  );
  if (given.length > 1) throw new LockConfigError(BACKEND_TOGETHER(given), given[1]);
  if (backend !== undefined)
    return { groups: {}, backends: { [DEFAULT_CLIENT]: backendOf(backend, 'backend') } };
  if (named === undefined) return { groups: resolveClients(clients), backends: {} };
  if (named === null || typeof named !== 'object' || Array.isArray(named))
    fail('groups', named, EXPECTED.groups);
  const groups: RedisGroups = {};
  const backends: Record<string, LockBackendDefinition> = {};
  for (const [name, group] of Object.entries(named)) {
    const field = `groups.${name}`;
    const o = (group ?? {}) as { clients?: unknown; backend?: unknown };
    if (typeof group !== 'object' || (o.clients === undefined) === (o.backend === undefined))
      fail(field, group, EXPECTED.namedGroup);
    if (o.backend !== undefined) backends[name] = backendOf(o.backend, `${field}.backend`);
    else groups[name] = checkGroup(o.clients, `${field}.clients`, false);
  }
  if (Object.keys(named).length === 0) fail('groups', named, EXPECTED.someGroup);
  return { groups, backends };
}

/** A group's backend: `'memory'`, or what a backend factory returned. */
function backendOf(value: unknown, field: string): LockBackendDefinition {
  if (value === 'memory') return memoryBackend();
  const o = value as Partial<LockBackendDefinition> | null;
  if (
    o === null ||
    typeof o !== 'object' ||
    typeof o.kind !== 'string' ||
    typeof o.create !== 'function' ||
    typeof o.supports !== 'object'
  )
    fail(field, value, EXPECTED.backend);
  return o as LockBackendDefinition;
}

/**
 * The Redis nodes of each group. Only an absent `clients` falls back (to REDIS_URL, else the
 * local default server); anything else that is not a group of valid nodes fails here, before
 * ioredis throws a bare TypeError or quietly connects somewhere else.
 */
function resolveClients(given: unknown): Record<string, readonly RedlockClientEntry[]> {
  const fromEnv = given === undefined && !!process.env.REDIS_URL;
  const clients = given === undefined ? [process.env.REDIS_URL || DEFAULT_REDIS_URL] : given;
  if (clients === null || typeof clients !== 'object' || isRedisInstance(clients))
    fail('clients', clients, EXPECTED.clients(isRedisInstance(clients)));
  const groups: Record<string, unknown> = Array.isArray(clients)
    ? { [DEFAULT_CLIENT]: clients }
    : { ...clients };
  if (Object.keys(groups).length === 0) fail('clients', clients, EXPECTED.someGroup);
  for (const [name, entries] of Object.entries(groups))
    checkGroup(entries, `clients.${name}`, fromEnv);
  return groups as RedisGroups;
}

/** A Redis group: a non-empty array of nodes. */
function checkGroup(entries: unknown, field: string, fromEnv: boolean): RedlockClientEntry[] {
  if (!Array.isArray(entries) || entries.length === 0) fail(field, entries, EXPECTED.group);
  entries.forEach((entry: unknown, i) => checkNode(entry, `${field}[${i}]`, fromEnv));
  return entries as RedlockClientEntry[];
}

function checkNode(entry: unknown, field: string, fromEnv: boolean): void {
  if (typeof entry === 'string') {
    const problem = nodeUrlProblem(entry, loadRedisDriver(field).parseURL);
    if (problem !== undefined)
      throw new LockConfigError(BAD_NODE_URL(field, entry, problem, fromEnv), field);
    return;
  }
  if (isRedisInstance(entry)) return;
  const problem = nodeEntryProblem(entry);
  if (problem !== undefined) throw new LockConfigError(BAD_NODE_ENTRY(field, problem), field);
  // RedisOptions: only the fields whose mistakes ioredis would throw on at construction, or
  // silently turn into another address, are checked; it validates the rest itself.
  const o = entry as Record<string, unknown>;
  if (o.host !== undefined && (typeof o.host !== 'string' || o.host === ''))
    fail(`${field}.host`, o.host, EXPECTED.host);
  const port = typeof o.port === 'string' && /^\d+$/.test(o.port) ? Number(o.port) : o.port;
  if (o.port !== undefined && !inRange(RANGES.port, port))
    fail(`${field}.port`, o.port, EXPECTED_NUMBER(RANGES.port));
  if (o.path !== undefined && typeof o.path !== 'string')
    fail(`${field}.path`, o.path, EXPECTED.path);
  if (o.sentinels !== undefined) {
    if (!Array.isArray(o.sentinels) || o.sentinels.length === 0)
      fail(`${field}.sentinels`, o.sentinels, EXPECTED.sentinels);
    if (typeof o.name !== 'string' || o.name === '')
      fail(`${field}.name`, o.name, EXPECTED.sentinelName);
  }
}

/**
 * Why ioredis would not reach the node a string names, or `undefined` if it would. The string is
 * read by ioredis's own `parseURL` (what `new Redis(string)` does with it), and refused when
 * what ioredis reads is no node: a parse error, no host, port 0 or a port out of range, a
 * database that is not a number, a Unix socket path the string did not give as one (`host/2`,
 * `http://host`), or TLS asked for in a way ioredis does not see.
 */
function nodeUrlProblem(
  url: string,
  parseURL: (url: string) => Record<string, unknown>,
): string | undefined {
  const p = NODE_URL_PROBLEM;
  if (url === '') return p.empty;
  let read: Record<string, unknown>;
  try {
    read = parseURL(url);
  } catch {
    return url.trim() === url ? p.unparsable : p.spaces;
  }
  const { host, port, path, db } = read;
  if (path !== undefined && !url.startsWith('/')) {
    // The URL's path taken for a socket's: the string has another scheme, or none.
    const scheme = /^([a-z][a-z\d+.-]*):\/\//i.exec(url)?.[1];
    if (scheme === undefined) return p.pathWithoutScheme(url);
    if (scheme.toLowerCase() === 'unix') return p.unixScheme(url.slice('unix://'.length));
    return p.otherScheme(scheme);
  }
  if (host === undefined && path === undefined && port === undefined) return p.noHost;
  if (port !== undefined && !inRange(RANGES.port, Number(port)))
    return (host === undefined ? p.port : p.portZero)(EXPECTED_NUMBER(RANGES.port));
  if (db !== undefined && !/^\d+$/.test(String(db))) return p.badDb;
  // ioredis turns TLS on for a string that starts with "rediss://" exactly.
  if (/^rediss:\/\//i.test(url) && !url.startsWith('rediss://')) return p.capitals;
  return undefined;
}

/** Why an entry that is neither a string nor a Redis/Cluster instance is not RedisOptions. */
function nodeEntryProblem(entry: unknown): string | undefined {
  const p = NODE_ENTRY_PROBLEM;
  if (typeof entry === 'function') return p.function;
  if (entry === null || typeof entry !== 'object') return p.notObject(entry);
  if (Array.isArray(entry)) return p.array;
  const o = entry as Record<string, unknown>;
  if (typeof o.then === 'function') return p.promise;
  if (entry instanceof URL) return p.url(entry.href);
  if (['duplicate', 'sendCommand', 'connect'].some((m) => typeof o[m] === 'function'))
    return p.otherClient;
  // Spreading an object without own fields (a Map, a Date...) into RedisOptions leaves nothing:
  // ioredis would connect to localhost:6379. A plain `{}` says so on purpose.
  const proto: unknown = Object.getPrototypeOf(entry);
  const plain = proto === null || Object.getPrototypeOf(proto) === null;
  if (!plain && Object.keys(entry).length === 0) return p.noOptions(entry);
  return undefined;
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(o))
    if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}
