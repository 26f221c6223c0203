import { LockConfigError } from './errors';
import type {
  LockBehaviourOptions,
  LockedOptions,
  RedlockClientEntry,
  RedlockModuleOptions,
} from './interfaces';
import { DEFAULT_CLIENT, DEFAULT_OPTIONS } from './redlock.constants';
import { BAD_OPTION } from './redlock.messages';

/** Module options after validation, with every default applied. @internal */
export interface ResolvedRedlockOptions extends Required<Omit<RedlockModuleOptions, 'clients'>> {
  groups: Readonly<Record<string, readonly RedlockClientEntry[]>>;
}

/** Per-call behaviour after merging call options over module options. @internal */
export type ResolvedLockBehaviour = Required<LockBehaviourOptions>;

const fail = (field: string, value: unknown, expected: string): never => {
  throw new LockConfigError(BAD_OPTION(field, value, expected), field);
};

const isNumber = (v: unknown): v is number => typeof v === 'number' && !Number.isNaN(v);

/**
 * Validates the behaviour fields shared by the module and by `@Locked`/`using` options.
 * `prefix` names where they came from (`''` for the module, `'@Locked(...)'` for a call).
 * @internal
 */
export function validateBehaviour(options: LockedOptions, prefix = ''): void {
  const f = (name: string) => (prefix ? `${prefix}.${name}` : name);
  const { ttl, watchdog, maxHold, waitTimeout, segments, client, onBusy } = options;
  if (
    ttl !== undefined &&
    (!isNumber(ttl) || !Number.isFinite(ttl) || ttl < 10 || !Number.isInteger(ttl))
  )
    fail(f('ttl'), ttl, 'an integer number of ms >= 10');
  if (watchdog !== undefined && typeof watchdog !== 'boolean')
    fail(f('watchdog'), watchdog, 'a boolean');
  if (maxHold !== undefined && (!isNumber(maxHold) || maxHold <= 0))
    fail(f('maxHold'), maxHold, 'a number of ms > 0 (or Infinity)');
  if (
    waitTimeout !== undefined &&
    (!isNumber(waitTimeout) || waitTimeout < 0 || !Number.isFinite(waitTimeout))
  )
    fail(f('waitTimeout'), waitTimeout, 'a finite number of ms >= 0 (0 tries once)');
  if (segments !== undefined && (!Number.isInteger(segments) || segments < 1 || segments > 1024))
    fail(f('segments'), segments, 'an integer from 1 to 1024');
  if (onBusy !== undefined && onBusy !== 'throw' && onBusy !== 'skip')
    fail(f('onBusy'), onBusy, "'throw' or 'skip'");
  if (client !== undefined && (typeof client !== 'string' || client === ''))
    fail(f('client'), client, 'the name of a client group');
}

const isEntry = (e: unknown): e is RedlockClientEntry =>
  (typeof e === 'string' && e.length > 0) || (e !== null && typeof e === 'object');

/**
 * Validates module options and merges the defaults. Runs once, in the options provider, so bad
 * options fail startup with a `LockConfigError` naming the field.
 * @internal
 */
export function resolveRedlockOptions(options: RedlockModuleOptions = {}): ResolvedRedlockOptions {
  if (options === null || typeof options !== 'object') fail('options', options, 'an object');
  validateBehaviour(options);
  const o = { ...DEFAULT_OPTIONS, ...stripUndefined(options) };
  if (typeof o.keyPrefix !== 'string') fail('keyPrefix', o.keyPrefix, 'a string');
  if (!Number.isInteger(o.busyStatus) || o.busyStatus < 400 || o.busyStatus > 599)
    fail('busyStatus', o.busyStatus, 'an HTTP error status (400-599)');
  if (typeof o.interceptor !== 'boolean') fail('interceptor', o.interceptor, 'a boolean');
  if (!isNumber(o.driftFactor) || o.driftFactor < 0 || o.driftFactor >= 0.5)
    fail('driftFactor', o.driftFactor, 'a number from 0 to 0.5');
  if (!Number.isInteger(o.localHandoffs) || o.localHandoffs < 0)
    fail('localHandoffs', o.localHandoffs, 'an integer >= 0');
  if (!isNumber(o.commandTimeout) || o.commandTimeout < 1)
    fail('commandTimeout', o.commandTimeout, 'a number of ms >= 1');

  const clients = options.clients ?? [process.env.REDIS_URL || 'redis://127.0.0.1:6379'];
  const groups: Record<string, readonly RedlockClientEntry[]> = {};
  if (Array.isArray(clients)) {
    groups[DEFAULT_CLIENT] = clients;
  } else if (clients && typeof clients === 'object') {
    Object.assign(groups, clients);
  } else {
    fail('clients', clients, 'an array of Redis nodes or a record of named groups');
  }
  if (Object.keys(groups).length === 0) fail('clients', clients, 'at least one client group');
  for (const [name, entries] of Object.entries(groups)) {
    if (!Array.isArray(entries) || entries.length === 0)
      fail(
        `clients.${name}`,
        entries,
        'a non-empty array of Redis nodes (URL, options or instance)',
      );
    entries.forEach((e, i) => {
      if (!isEntry(e))
        fail(
          `clients.${name}[${i}]`,
          e,
          'a Redis URL, ioredis options or a Redis/Cluster instance',
        );
    });
  }
  const { clients: _omit, ...rest } = o as typeof o & { clients?: unknown };
  return Object.freeze({ ...rest, groups: Object.freeze(groups) });
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(o))
    if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}
