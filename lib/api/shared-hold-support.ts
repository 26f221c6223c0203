import { LockConfigError } from '../errors';
import type { LockedOptions } from '../interfaces';
import type { LockBackendDefinition } from '../core/lock-backend-definition';
import { SHARED_UNSUPPORTED } from './api.messages';

/**
 * The one check of a shared hold against the backend of its group (PRODUCT 2.7), made by the API
 * layer for every backend alike: at startup for each `@Locked` method (`LockExplorer`), and when
 * `LockService.using`/`acquire` resolve a call's options. `backend` undefined: a Redis group,
 * which has every kind.
 * @throws LockConfigError naming the backend and what to use instead, when it has not the kind
 *   `options` ask for (`field` names the option in the error, `mode` or `permits`)
 * @internal
 */
export function refuseUnsupportedShare(
  who: string,
  group: string,
  backend: LockBackendDefinition | undefined,
  options: Pick<LockedOptions, 'mode' | 'permits'>,
  field: (option: 'mode' | 'permits') => string = (option) => option,
): void {
  const { mode, permits = 1 } = options;
  const shared = mode === 'read' ? 'read' : permits > 1 ? 'permits' : undefined;
  if (!shared || !backend || backend.supports[shared]) return;
  throw new LockConfigError(
    SHARED_UNSUPPORTED(who, group, backend.kind, shared),
    field(shared === 'read' ? 'mode' : 'permits'),
  );
}
