import type { LockNodes } from './lock-nodes';
import type { VoteDone } from './quorum';
import type { RedisNode } from './redis-node';
import { asError } from './script-runner';
import { type FenceMode, RELEASE } from './scripts';

/** A release's outcome on one node: whether it woke racing waiters, or the error. */
export type Freed = boolean | Error;

/**
 * RELEASE of `token`'s keys on every node (compare-and-delete: never someone else's lock), each
 * key granted to its oldest waiter queued in Redis. Concludes to `done` once a majority freed
 * the keys (a single node: its answer), with whether racing waiters were woken (a PUBLISH on
 * some node), or fails when errors leave no majority possible.
 */
export function runRelease(
  group: LockNodes,
  keys: readonly string[],
  token: string,
  done: VoteDone<boolean>,
): void {
  group.quorum.collect<RedisNode, Freed, boolean>(
    group.nodes,
    (node, answer) => releaseOn(group, node, keys, token, answer),
    isFreed,
    (results) => {
      group.quorum.failIfNoMajority(keys, results, 'release');
      return results.some((r) => r === true);
    },
    done,
  );
}

/** A vote for the release: the node answered (an error is a vote against). */
const isFreed = (r: Freed): boolean => !(r instanceof Error);

/** Releases `token`'s keys on one node: whether it published a wake-up, or the error. */
export function releaseOn(
  group: LockNodes,
  node: RedisNode,
  keys: readonly string[],
  token: string,
  answer: (r: Freed) => void,
): void {
  const { runner, space, settings } = group;
  const units = space.units(keys);
  const args: [string, '0', number, FenceMode] = [token, '0', settings.block, group.fenceMode];
  if (units.length === 1) {
    runner.send(node, RELEASE, units[0], args, (e, published) => answer(e ?? published! > 0));
    return;
  }
  Promise.all(units.map((u) => runner.run(node, RELEASE, u, args))).then(
    (published) => answer(published.some((n) => n > 0)),
    (e: unknown) => answer(asError(e)),
  );
}
