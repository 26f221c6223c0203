import { performance } from 'node:perf_hooks';
import type { Taken } from '../../redis/lock-protocol';
import type { Lease } from '../lease';

/**
 * A lease held for a grant's claim window only, before its claim (what `HoldAtOnce` and
 * `HoldFromReleaseAnswer` give; a grant claimed the plain way holds the full lease already) is
 * renewed to the full `ttl` beside the holder by `claim`:
 * - at once when held from a grant message (`claimNow`: the claim must be on its way before the
 *   holder runs);
 * - else (granted by a release of this process, held from its answer) a third of the way through
 *   the window, if it is still held then: most such holds end sooner and need no renewal at all.
 * Lost or failing, the lease ends with the window and its watchdog says so. Goes with the last
 * of those two policies.
 * @internal
 */
export function claimBeside(
  lease: Lease,
  ttl: number,
  taken: Taken,
  claim: () => Promise<unknown>,
): void {
  if (lease.ttl >= ttl) return;
  if (taken.claimNow) {
    void claim().catch(() => undefined);
    return;
  }
  const timer = setTimeout(() => {
    // Released, over, or renewed meanwhile (by its watchdog).
    if (lease.released || !lease.validAt(performance.now()) || lease.ttl >= ttl) return;
    void claim().catch(() => undefined);
  }, lease.ttl / 3);
  timer.unref();
}
