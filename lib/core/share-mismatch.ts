import { LockConfigError } from '../errors';
import { MODE_MISMATCH, PERMITS_MISMATCH } from './core.messages';
import type { Share } from './lease';

/**
 * The error for a shared hold of kind `asked` on `key` while its holders are of kind `held`
 * (another N of permits, or read against permits); undefined when the two kinds agree or one
 * of them is the exclusive lock (that one waits, it is no mistake).
 * @internal
 */
export function shareMismatch(
  key: string,
  asked: Share | undefined,
  held: Share | undefined,
): LockConfigError | undefined {
  if (asked === undefined || held === undefined || held === asked) return undefined;
  if (asked !== 'read' && held !== 'read') {
    return new LockConfigError(PERMITS_MISMATCH(key, asked, held), 'permits');
  }
  const wanted = asked === 'read' ? 'read' : `permits: ${asked}`;
  const holders = held === 'read' ? 'read' : `permits: ${held}`;
  return new LockConfigError(
    MODE_MISMATCH(key, wanted, holders),
    asked === 'read' ? 'mode' : 'permits',
  );
}
