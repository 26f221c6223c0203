/*
 * The uncontended cycle on a group of one node, without a vote: its first try (TRY) and its
 * release (RELEASE) go out with one callback each, and the node's answer is the outcome. The
 * same scripts, arguments, undo and outcomes as the rounds of `acquire-round.ts` and
 * `release-round.ts` (which take one node as well): this only skips `Quorum.collect`'s
 * closures and arrays. It earns its lines on the uncontended bench (`npm run bench -- --only
 * uncontended --runs 1`, 1 server, builds alternated in one window on the shared 2-vCPU VM,
 * median x raw floor): before the vote 0.68 (9 runs); every cycle through the vote 0.63 (6
 * runs, 8% slower); with this file 0.70 (6 runs).
 */

import { LockBackendError } from '../../errors';
import { type AcquireRound, oneNodeOutcome, type SharedOutcome } from './acquire-round';
import type { LockNodes } from './lock-nodes';
import type { VoteDone } from './quorum';
import { releaseOn } from './release-round';
import type { FenceMode } from './scripts';
import { TRY } from './scripts';

/** TRY on the only node: its reply is the first try's outcome (an error fails it, undone). */
export function tryOnOne(
  group: LockNodes,
  unit: readonly string[],
  args: [string, number, number, FenceMode],
  round: AcquireRound,
  done: VoteDone<SharedOutcome>,
): void {
  const node = group.nodes[0];
  group.runner.sendAcked(node, TRY, unit, args, round.acks, (error, reply) => {
    if (error) {
      group.undo(node, round.keys, round.token);
      return done(new LockBackendError(round.keys, [error]));
    }
    done(undefined, oneNodeOutcome(round, reply!));
  });
}

/** RELEASE on the only node: whether it woke racing waiters, or its error as the failure. */
export function releaseOnOne(
  group: LockNodes,
  keys: readonly string[],
  token: string,
  done: VoteDone<boolean>,
): void {
  releaseOn(group, group.nodes[0], keys, token, (r) =>
    r instanceof Error ? done(new LockBackendError(keys, [r], 'release')) : done(undefined, r),
  );
}
