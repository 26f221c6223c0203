import { LockConfigError } from '../errors';
import type { RedlockModuleExtras, RedlockModuleOptions } from '../interfaces';
import { MODULE_KEYS, nearestName } from '../options/redlock-options';
import { DEFAULT_CLIENT, DEFAULT_REDIS_URL } from '../redlock.constants';
import { BAD_OPTION, OPTIONS_NOT_OBJECT, UNKNOWN_OPTION } from '../options/option.messages';
import { TESTING_CLIENTS, TESTING_EXPECTED, TESTING_OPTIONS_LABEL } from './testing.messages';

/**
 * Options of `RedlockTestingModule.forRoot()`: the options of `RedlockModule.forRoot()` (ttl,
 * waitTimeout, busyStatus, interceptor...) without `clients`, which connect to nothing here;
 * `groups` names the lock groups instead.
 */
export interface RedlockTestingModuleOptions
  extends Omit<RedlockModuleOptions, 'clients' | 'backend' | 'groups'>, RedlockModuleExtras {
  /**
   * Names of the lock groups the code under test locks in (the `client` option of `@Locked`
   * and `LockService`). Each is an independent in-memory backend.
   * @default ['default']
   */
  groups?: readonly string[];
}

const TESTING_KEYS = [
  ...MODULE_KEYS.filter((k) => k !== 'clients' && k !== 'backend' && k !== 'groups'),
  'isGlobal',
  'groups',
];

/**
 * The `RedlockModule.forRoot()` options the testing module stands for: the same behaviour,
 * and one group per name. The groups' entries are never connected (the registry builds every
 * group from the in-memory backend factory); one is needed only because a Redis group must
 * have a node. The shape is checked here, so messages name the testing module; the values are
 * checked by the module's own validation, with its messages.
 * @internal
 */
export function redlockOptionsForTest(
  options: unknown,
): RedlockModuleOptions & RedlockModuleExtras {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new LockConfigError(
      OPTIONS_NOT_OBJECT(TESTING_OPTIONS_LABEL, options, 'forRoot'),
      'options',
    );
  }
  for (const key of Object.keys(options)) {
    if (TESTING_KEYS.includes(key)) continue;
    if (key === 'clients' || key === 'backend') throw new LockConfigError(TESTING_CLIENTS, key);
    const nearest = nearestName(key, TESTING_KEYS);
    throw new LockConfigError(
      UNKNOWN_OPTION(key, TESTING_OPTIONS_LABEL, nearest, TESTING_KEYS),
      key,
    );
  }
  const { groups = [DEFAULT_CLIENT], ...rest } = options as RedlockTestingModuleOptions;
  const named =
    Array.isArray(groups) &&
    groups.length > 0 &&
    groups.every((g: unknown) => typeof g === 'string' && g !== '');
  if (!named) {
    throw new LockConfigError(BAD_OPTION('groups', groups, TESTING_EXPECTED.groups), 'groups');
  }
  const clients = Object.fromEntries(groups.map((name) => [name, [DEFAULT_REDIS_URL]]));
  return { ...rest, clients };
}
