import { performance } from 'node:perf_hooks';
import { LockBackendError } from '../../errors';
import type { LockNodes } from './lock-nodes';
import type { VoteDone } from './quorum';
import type { RedisNode } from './redis-node';
import { asError, type ReplicaAcks } from './script-runner';
import { RAISE_FENCE, type Script, type ScriptArgs, type SharedReply } from './scripts';

/** What an acquire round took. */
export interface Taken {
  readonly kind: 'ok';
  /** One fence per key. */
  readonly fences: readonly number[];
  /** `performance.now()` when the round started: the lease runs from there. */
  readonly start: number;
  /** Fences reserved after the holder's (local handoffs without a round trip). */
  readonly spare: number;
  /** Taken by a first try with the key free. */
  readonly uncontended: boolean;
}

/** An acquire round's outcome: taken, or busy with the holder's remaining lease. */
export type Outcome = Taken | { readonly kind: 'busy'; readonly pttl: number };

/**
 * A shared acquire round's outcome: also `conflict` when the key is held as another kind of
 * shared hold (`held`: 0 read, N permits of N).
 */
export type SharedOutcome = Outcome | { readonly kind: 'conflict'; readonly held: number };

/** A script that takes keys: TRY, ACQUIRE, or ACQUIRE_SHARED for read locks and permits. */
export type AcquireScript = Script<ScriptArgs, SharedReply>;

/** What one acquire round is for: whose keys, its lease, and how its votes count. */
export interface AcquireRound {
  readonly keys: readonly string[];
  readonly token: string;
  readonly ttl: number;
  /** `performance.now()` when the round started. */
  readonly start: number;
  /** Fences reserved after the holder's, on a single node. */
  readonly spare: number;
  /** A first try (TRY). */
  readonly uncontended: boolean;
  /** Every node must agree (permits on a quorum), not a majority. */
  readonly everyNode: boolean;
  /**
   * The caller waits if refused: a round that restarted nodes keep from a majority is busy
   * until they may vote (otherwise it fails with LockBackendError).
   */
  readonly waits: boolean;
  readonly acks: ReplicaAcks | undefined;
}

/**
 * One node's answer to an acquire: its reply, the error that stands for its vote, or `barred`:
 * it took the keys but may not vote yet (restarted recently, see `NodeRestarts`).
 */
export type Vote = NodeAnswer | { readonly kind: 'barred' };

/** One node's answer to an acquire: its reply, or the error that stands for it. */
export type NodeAnswer = SharedReply | { readonly kind: 'error'; readonly error: Error };

const BARRED: Vote = { kind: 'barred' };

/** A node's reply as its vote: a node that may not vote yet took the keys without a say. */
const voteOf = (group: LockNodes, node: RedisNode, reply: NodeAnswer): Vote =>
  reply.kind === 'ok' && !group.restarts.votes(node) ? BARRED : reply;

/**
 * Sends `script` with `args` to every node, once per unit of keys (one, but one per key on a
 * Redis Cluster), and concludes the round to `done`. On a quorum it goes on as soon as a
 * majority agreed (or can no longer agree), as Redlock does: the slowest node's answer is not
 * waited for, and what it took is undone (see `conclude`). A node's error is a vote against,
 * its effect undone at once while the round is open; once the round has its outcome, that
 * outcome undid the nodes still out (or the holder's release frees them), and an undo sent now
 * would land after the token's next attempt on that node's connection, taking away a key that
 * attempt counts as held.
 */
export function runAcquire(
  group: LockNodes,
  script: AcquireScript,
  units: readonly string[][],
  args: ScriptArgs,
  round: AcquireRound,
  done: VoteDone<SharedOutcome>,
): void {
  const { nodes, quorum, runner } = group;
  const { keys, token, acks } = round;
  const unit = units.length === 1 ? units[0] : undefined;
  quorum.collect<RedisNode, Vote, SharedOutcome>(
    nodes,
    (node, answer, over) => {
      if (!unit) {
        return void sendUnits(group, script, node, units, args, round, over).then((v) =>
          answer(voteOf(group, node, v)),
        );
      }
      runner.sendAcked(node, script, unit, args, acks, (error, reply) => {
        if (!error) return answer(voteOf(group, node, reply!));
        if (!over()) group.undo(node, keys, token);
        answer({ kind: 'error', error });
      });
    },
    isTaken,
    (votes) => conclude(group, round, votes),
    done,
    round.everyNode ? nodes.length : quorum.size,
  );
}

/**
 * A vote for the round: the node took the keys. A barred node abstains: the others are heard, so
 * a round it alone kept from a majority is told from a busy one.
 */
const isTaken = (v: Vote): boolean | undefined =>
  v.kind === 'barred' ? undefined : v.kind === 'ok';

/**
 * Redis Cluster, several keys: one script per key, in sorted order, undone on a refusal. A node
 * still at it when the round is over (`over`) stops there, for the reason an error is not
 * undone then (see `runAcquire`).
 */
async function sendUnits(
  group: LockNodes,
  script: AcquireScript,
  node: RedisNode,
  units: readonly string[][],
  args: ScriptArgs,
  round: AcquireRound,
  over: () => boolean,
): Promise<NodeAnswer> {
  const { token, acks } = round;
  const fences: number[] = [];
  for (let u = 0; u < units.length; u++) {
    if (over()) return { kind: 'error', error: new Error(ROUND_OVER) };
    let reply: SharedReply;
    try {
      reply = await group.runner.runAcked(node, script, units[u], args, acks);
    } catch (e) {
      if (!over()) group.undoUnits(node, units.slice(0, u + 1), token);
      return { kind: 'error', error: asError(e) };
    }
    if (reply.kind !== 'ok') {
      if (u > 0 && !over()) group.undoUnits(node, units.slice(0, u), token);
      return reply;
    }
    fences.push(...reply.fences);
  }
  return { kind: 'ok', fences };
}

/** A node's vote when the round was over before it sent all its units (never counted). */
const ROUND_OVER = 'the round was over before this node was asked for every key';

/**
 * The round's outcome from the votes in so far. A single node: its answer (an error fails the
 * round). A quorum: taken when enough nodes agreed within the lease's validity; otherwise what
 * was taken is given back, also on nodes whose answer is still out (errors were undone when
 * they came in), and the round is busy, a conflict, or failed when errors alone left no
 * majority possible. A round that nodes kept from voting (`barred`) left short of a majority it
 * would have had is busy until the first of them may vote when the caller waits, and fails
 * like a lost quorum when it does not.
 * @throws LockBackendError when too many nodes failed, or restarted nodes may not vote yet
 */
function conclude(
  group: LockNodes,
  round: AcquireRound,
  votes: (Vote | undefined)[],
): SharedOutcome | Promise<Taken> {
  const { keys, token, ttl, start, uncontended, everyNode } = round;
  // A single node is never barred (see NodeRestarts): its vote is its answer.
  if (group.single) return oneNodeOutcome(round, votes[0] as NodeAnswer);
  const { nodes } = group;
  const need = everyNode ? nodes.length : group.quorum.size;
  const perNode: (readonly number[])[] = [];
  for (const v of votes) if (v?.kind === 'ok') perNode.push(v.fences);
  const validity = ttl - (performance.now() - start) - group.settings.drift(ttl);
  if (perNode.length >= need && validity > 0) {
    // Every node had to agree (permits): the first node minted every holder's fence, in the
    // order it admitted them, so those are unique and increasing. The largest of each node's
    // (a majority's rule) could repeat: two holders minting on the nodes in different orders.
    if (everyNode) return quorumTaken(perNode[0], start, uncontended);
    const settled = settleFences(group, keys, perNode);
    return settled instanceof Promise
      ? settled.then((fences) => quorumTaken(fences, start, uncontended))
      : quorumTaken(settled, start, uncontended);
  }
  nodes.forEach((node, i) => {
    const v = votes[i];
    if (v === undefined || v.kind === 'ok' || v.kind === 'barred') group.undo(node, keys, token);
  });
  const errors: Error[] = [];
  let pttl: number | undefined;
  let conflict: SharedOutcome | undefined;
  let barred = 0;
  for (const v of votes) {
    if (v?.kind === 'error') errors.push(v.error);
    else if (v?.kind === 'busy') pttl = pttl === undefined ? v.pttl : Math.min(pttl, v.pttl);
    else if (v?.kind === 'conflict') conflict = v;
    else if (v?.kind === 'barred') barred++;
  }
  if (errors.length > nodes.length - need) throw new LockBackendError(keys, errors);
  if (barred > 0 && perNode.length + barred >= need) {
    const { restarts } = group;
    if (round.waits) return { kind: 'busy', pttl: restarts.clearsIn() };
    throw new LockBackendError(keys, [new Error(restarts.why()), ...errors]);
  }
  return conflict ?? { kind: 'busy', pttl: pttl ?? 0 };
}

/**
 * A single node's vote as the round's outcome: its reply (taken with the round's spare fences).
 * @throws LockBackendError for an error
 */
export function oneNodeOutcome(round: AcquireRound, vote: NodeAnswer): SharedOutcome {
  if (vote.kind === 'error') throw new LockBackendError(round.keys, [vote.error]);
  if (vote.kind !== 'ok') return vote;
  const { start, spare, uncontended } = round;
  return { kind: 'ok', fences: vote.fences, start, spare, uncontended };
}

/** A quorum round's lease: no spare fences (no local handoff without a round trip there). */
function quorumTaken(fences: readonly number[], start: number, uncontended: boolean): Taken {
  return { kind: 'ok', fences, start, spare: 0, uncontended };
}

/**
 * Quorum only: nodes that disagree on a fence get raised to the largest one before the holder
 * runs, so the next holder's fence is larger on every majority. Nodes in step (the usual case)
 * cost nothing.
 */
export function settleFences(
  group: LockNodes,
  keys: readonly string[],
  perNode: (readonly number[])[],
): readonly number[] | Promise<readonly number[]> {
  const first = perNode[0];
  let inStep = true;
  for (let n = 1; n < perNode.length && inStep; n++) {
    const nodeFences = perNode[n];
    for (let i = 0; i < first.length; i++) if (nodeFences[i] !== first[i]) inStep = false;
  }
  // In step (the usual case): every node's fences are the same, nothing to copy or raise.
  if (inStep) return first;
  const fences = first.slice();
  for (let n = 1; n < perNode.length; n++) {
    const nodeFences = perNode[n];
    for (let i = 0; i < fences.length; i++) {
      if (nodeFences[i] > fences[i]) fences[i] = nodeFences[i];
    }
  }
  const allKeys = group.space.allKeys(keys);
  return group
    .onEvery((node) => group.runner.run(node, RAISE_FENCE, allKeys, fences))
    .then(() => fences);
}
