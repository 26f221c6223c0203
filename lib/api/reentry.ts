import { LockConfigError } from '../errors';
import { READ_TO_WRITE } from './api.messages';
import { MODE_MISMATCH } from '../engine/engine.messages';
import type { Behaviour } from './call-behaviour';
import { holderInScope, type LockScope } from './lock-context';

/**
 * A nested call asking for keys its async context holds: a write holder may enter any hold of
 * its keys, a holder enters the same kind again; a read holder asking for the write lock (or a
 * permit holder for another kind) fails at once: it would wait for itself.
 * @throws LockConfigError
 * @internal
 */
export function checkReentry(scope: LockScope, keys: readonly string[], b: Behaviour): void {
  for (const key of keys) {
    const holder = holderInScope(scope, b.clientName, key);
    if (!holder || (holder.mode === 'write' && holder.permits === 1)) continue;
    if (holder.mode === b.mode && holder.permits === b.permits) continue;
    if (holder.mode === 'read' && b.mode === 'write' && b.permits === 1) {
      throw new LockConfigError(READ_TO_WRITE(key), 'mode');
    }
    throw new LockConfigError(MODE_MISMATCH(key, describe(b), describe(holder)), 'mode');
  }
}

const describe = (h: { mode: 'read' | 'write'; permits: number }): string =>
  h.mode === 'read' ? 'read' : h.permits > 1 ? `permits: ${h.permits}` : 'write';
