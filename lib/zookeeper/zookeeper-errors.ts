import type * as Zk from 'node-zookeeper-client';
import { LockConfigError } from '../errors';
import { asBackendError } from '../core/backend-error';
import type { Share } from '../core/lock-backend';
import { MODE_MISMATCH } from '../core/core.messages';
import { shareMismatch as mismatchOf } from '../core/share-mismatch';
import { kindShare, type LockNode } from './lock-nodes';
import type { ZooKeeperSession } from './zookeeper-session';

/** The system a LockBackendError names. @internal */
export const SYSTEM = 'ZooKeeper';

/** `error` as the LockBackendError of `operation` on `keys` (named errors pass as they are). */
export function backendError(keys: readonly string[], operation: string, error: unknown): Error {
  return asBackendError(keys, operation, error, SYSTEM);
}

/** One driver call on the session; any failure is a LockBackendError for `keys`. @internal */
export async function callFor<T>(
  session: ZooKeeperSession,
  keys: readonly string[],
  operation: string,
  run: (client: Zk.Client, done: (error: unknown, value?: T) => void) => void,
): Promise<T> {
  try {
    return await session.run(run);
  } catch (error) {
    throw backendError(keys, operation, error);
  }
}

/**
 * The LockConfigError of a caller asking `share` on a key whose line has a shared hold of
 * another kind (`ahead`) before it: read against permits, or another number of permits (the
 * engine's `shareMismatch`). A node of a kind this module never writes is named as it is.
 * @internal
 */
export function shareMismatch(key: string, share: Share, ahead: LockNode): LockConfigError {
  const held = kindShare(ahead.kind);
  return (
    mismatchOf(key, share, held) ??
    new LockConfigError(
      MODE_MISMATCH(key, share === 'read' ? 'read' : `permits: ${share}`, ahead.kind),
      share === 'read' ? 'mode' : 'permits',
    )
  );
}
