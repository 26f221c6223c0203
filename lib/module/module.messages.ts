import { quotedList, sentence } from '../redlock.messages';

/**
 * The messages of the Nest wiring (`module/`): client groups and their connections, the startup
 * check of `@Locked` methods. `nest-locked/testing` names an unknown group with `UNKNOWN_CLIENT`.
 */

export const REDLOCK_WITHOUT_REDIS = (name: string) =>
  `@InjectRedlock('${name}'): the lock group "${name}" has no Redis behind it (another ` +
  `backend, or RedlockTestingModule's memory), so there is no Redlock instance to use. Use ` +
  `LockService, or put the group on Redis.`;

export const UNKNOWN_CLIENT = (name: string, known: readonly string[]) =>
  `Unknown lock client group "${name}". Configured groups: ${quotedList(known)}. ` +
  `Add it to RedlockModule.forRoot({ clients: { ${name}: [...] } }) (in unit tests, to ` +
  `RedlockTestingModule.forRoot({ groups: [..., '${name}'] })) or fix the "client" option.`;

export const LOCKED_UNKNOWN_CLIENT = (where: string, name: string, known: readonly string[]) =>
  `@Locked on ${where}: ${UNKNOWN_CLIENT(name, known)}`;

export const BACKEND_UNREACHABLE_AT_START = (group: string, kind: string, reason: string) =>
  `Lock group "${group}" (${kind}) is not reachable at startup: ${sentence(reason)} Locks fail with ` +
  'LockBackendError until it answers.';

export const REDIS_UNREACHABLE_AT_START = (group: string, reason: string) =>
  `Lock group "${group}": not connected to Redis yet: ${sentence(reason)} Calls fail with ` +
  `LockBackendError until it answers.`;

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

export const APP_NOT_INITIALISED = (group: string) =>
  `Lock group "${group}" is not connected: the Nest application was not initialised; call ` +
  `app.init() (or app.listen(), or init() on a testing module) before taking locks. ` +
  `RedlockModule opens its connections when the application initialises.`;
