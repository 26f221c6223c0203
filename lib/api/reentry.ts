import { LockConfigError } from '../errors';
import { READ_TO_WRITE } from './api.messages';
import { MODE_MISMATCH } from '../core/core.messages';
import type { Behaviour } from './call-behaviour';
import { type HoldRecord, holderInScope, type LockScope } from './lock-context';

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

/** What `reenter` found: the holds a nested call entered, and the keys it must still take. */
export interface Reentry {
  readonly entered: readonly HoldRecord[];
  readonly needed: readonly string[];
}

/**
 * A nested call enters every hold of its async context that covers one of its `keys` (each hold
 * once): those holds are released only once the call has ended, even if nobody awaits it. The
 * keys no hold of the context covers are still to be taken.
 * @internal
 */
export function reenter(scope: LockScope, client: string, keys: readonly string[]): Reentry {
  const entered: HoldRecord[] = [];
  const needed: string[] = [];
  for (const key of keys) {
    const holder = holderInScope(scope, client, key);
    if (!holder) {
      needed.push(key);
    } else if (!entered.includes(holder.record)) {
      holder.record.enter();
      entered.push(holder.record);
    }
  }
  return { entered, needed };
}

/** Every hold of `entered` left (by a call that ended), then `done`. @internal */
export function leaveAll(entered: readonly HoldRecord[], done: () => void): void {
  let left = entered.length;
  if (left === 0) return done();
  const one = () => {
    if (--left === 0) done();
  };
  for (const record of entered) record.leave(one);
}
