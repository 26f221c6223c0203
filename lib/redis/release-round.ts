import type { LockNodes } from './lock-nodes';
import type { VoteDone } from './quorum';
import type { RedisNode } from './redis-node';
import { asError } from './script-runner';
import { type FenceMode, RELEASE, type ReleaseGrantReply } from './scripts';

/**
 * A lock or share granted by a release this process sent (single node): the waiter's token, its
 * fence, the spare fences after it, and whether a writer queued behind a read share.
 */
export type ReleaseGrant = ReleaseGrantReply;

/** Hears what a release granted (single node), as soon as its answer comes. */
export type OnGrants = (grants: readonly ReleaseGrant[]) => void;

/** A release's outcome on one node: whether it woke racing waiters, or the error. */
export type Freed = boolean | Error;

/**
 * RELEASE of `token`'s keys on every node (compare-and-delete: never someone else's lock), each
 * key granted to its oldest waiter queued in Redis. Concludes to `done` once a majority freed
 * the keys (a single node: its answer), with whether racing waiters were woken (a PUBLISH on
 * some node), or fails when errors leave no majority possible. `onGrants` (single node: quorum
 * groups queue nobody) hears what the release granted as soon as its answer comes.
 */
export function runRelease(
  group: LockNodes,
  keys: readonly string[],
  token: string,
  onGrants: OnGrants | undefined,
  done: VoteDone<boolean>,
): void {
  const grantsTo = group.single ? onGrants : undefined;
  group.quorum.collect<RedisNode, Freed, boolean>(
    group.nodes,
    (node, answer) => releaseOn(group, node, keys, token, grantsTo, answer),
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
  onGrants: OnGrants | undefined,
  answer: (r: Freed) => void,
): void {
  const { runner, space, settings } = group;
  const units = space.units(keys);
  const args: [string, '0', number, FenceMode] = [token, '0', settings.block, group.fenceMode];
  if (units.length === 1) {
    runner.send(node, RELEASE, units[0], args, (e, r) => {
      if (r && r.grants.length > 0) onGrants?.(r.grants);
      answer(e ?? r!.published > 0);
    });
    return;
  }
  Promise.all(units.map((u) => runner.run(node, RELEASE, u, args))).then(
    (replies) => {
      const grants = replies.flatMap((r) => r.grants);
      if (grants.length > 0) onGrants?.(grants);
      answer(replies.some((r) => r.published > 0));
    },
    (e: unknown) => answer(asError(e)),
  );
}
