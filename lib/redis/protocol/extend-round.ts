import type { LockNodes } from './lock-nodes';
import type { VoteDone } from './quorum';
import type { RedisNode } from './redis-node';
import type { RenewalBatcher } from './renewal-batcher';
import { asError, type ReplicaAcks } from './script-runner';
import { EXTEND, EXTEND_SHARED, type ExtendReply, type ShareArg } from './scripts';

/** What one renewal asks of the nodes. */
export interface Renewal {
  readonly keys: readonly string[];
  readonly token: string;
  /** The new lease, in ms from now. */
  readonly ttl: number;
  readonly acks: ReplicaAcks | undefined;
  /** The shared hold renewed (read, or N permits), or undefined for an exclusive lock. */
  readonly share: ShareArg | undefined;
  /** On a quorum: put the lock back on nodes that lost it (EXTEND's repair). */
  readonly repairs: boolean;
  /** Joins the renewals due together (`RenewalBatcher`) where it can. */
  readonly batched: boolean;
}

/**
 * Renews `renewal.keys` on every node and concludes to `done` whether the token still holds
 * them on a majority. On a quorum, nodes that lost the lock (a restart without persistence) get
 * it back while the token still holds a majority elsewhere, so rolling restarts never leave it
 * on a minority; without that majority the put-back is given back at once. A batched renewal
 * joins the renewals due within a short window, one script call per node, unless replicas must
 * acknowledge it or its keys span Cluster slots; a failure is a LockBackendError when errors
 * leave no majority possible.
 */
export function runExtend(
  group: LockNodes,
  renewals: RenewalBatcher,
  renewal: Renewal,
  done: VoteDone<boolean>,
): void {
  const { nodes, quorum, space } = group;
  const { keys, token, ttl, acks, share, repairs, batched } = renewal;
  const repair = repairs && !group.single ? '1' : '0';
  // Exclusive holds with the group's repair rule only: shared holds renew with their own script.
  const lockKeys =
    batched && !acks && !share && repairs ? space.lockKeysInOneUnit(keys) : undefined;
  quorum.collect<RedisNode, ExtendReply | Error, boolean>(
    nodes,
    (node, answer) =>
      lockKeys
        ? renewals.add(node, lockKeys, token, ttl, answer)
        : void extendOn(group, node, renewal, repair).then(answer, (e: unknown) =>
            answer(asError(e)),
          ),
    (v) => v === 'renewed',
    (votes) => {
      if (quorum.reached(votes.filter((v) => v === 'renewed').length)) return true;
      nodes.forEach((node, i) => {
        if (votes[i] === 'repaired' || votes[i] === undefined) group.undo(node, keys, token);
      });
      quorum.failIfNoMajority(keys, votes, 'extend');
      return false;
    },
    done,
  );
}

/** EXTEND (or EXTEND_SHARED) of every unit of keys on one node: its answer for them all. */
async function extendOn(
  group: LockNodes,
  node: RedisNode,
  renewal: Renewal,
  repair: '0' | '1',
): Promise<ExtendReply> {
  const { keys, token, ttl, acks, share } = renewal;
  const { runner } = group;
  const replies = await Promise.all(
    group.space
      .units(keys)
      .map((u) =>
        share === undefined
          ? runner.runAcked(node, EXTEND, u, [token, ttl, repair], acks)
          : runner.runAcked(node, EXTEND_SHARED, u, [token, ttl, repair, share], acks),
      ),
  );
  if (replies.includes('lost')) return 'lost';
  return replies.includes('repaired') ? 'repaired' : 'renewed';
}
