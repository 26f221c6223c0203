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

export const APP_NOT_INITIALISED = (group: string) =>
  `Lock group "${group}" is not connected: the Nest application was not initialised; call ` +
  `app.init() (or app.listen(), or init() on a testing module) before taking locks. ` +
  `RedlockModule opens its connections when the application initialises.`;
