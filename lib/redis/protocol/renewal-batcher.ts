import { performance } from 'node:perf_hooks';
import { keySlot } from './key-slot';
import { isCluster, type RedisNode } from './redis-node';
import type { ScriptRunner } from './script-runner';
import { type ExtendReply, RENEW_MANY } from './scripts';

/** One hold's renewal on one node, waiting for its batch. */
interface Pending {
  /** The hold's lock keys (one slot on a Cluster). */
  readonly keys: readonly string[];
  readonly token: string;
  readonly ttl: number;
  readonly answer: (reply: ExtendReply | Error) => void;
}

/** The longest a renewal waits for others to join its batch, ms. */
export const RENEWAL_WINDOW_MS = 20;
/** A renewal waits at most this share of its lease (short leases wait less, or not at all). */
const WINDOW_SHARE_OF_TTL = 0.01;
/** Holds per script call: bounds how long one call keeps Redis busy (two commands each). */
export const RENEWAL_BATCH_MAX = 500;
/** Keys per script call (holds of many keys each make smaller calls). */
const RENEWAL_KEYS_MAX = 2_000;
/** Answers of one call handed to their holds per turn of the event loop. */
const ANSWERS_PER_TURN = 50;

/**
 * Watchdog renewals, batched: renewals that fall due within a short window (at most 20 ms, and
 * at most 1% of their lease) go to each node as one RENEW_MANY script call per up to 500 holds
 * and 2,000 keys (per hash slot on a Cluster), instead of one EXTEND each. Every hold still gets
 * its own answer from its node (renewed, repaired or lost; or the call's error), so a quorum
 * counts its votes exactly as with EXTEND.
 * @internal
 */
export class RenewalBatcher {
  private readonly pending = new Map<RedisNode, Pending[]>();
  private timer?: NodeJS.Timeout;
  /** `performance.now()` when the armed timer fires. */
  private flushAt = Infinity;

  constructor(
    private readonly runner: ScriptRunner,
    /** '1' on quorums: a lock missing on a node is put back (EXTEND's repair). */
    private readonly repair: '0' | '1',
  ) {}

  /** Queues the renewal of `keys` (lock keys, one slot) held by `token` on `node`. */
  add(
    node: RedisNode,
    keys: readonly string[],
    token: string,
    ttl: number,
    answer: (reply: ExtendReply | Error) => void,
  ): void {
    let list = this.pending.get(node);
    if (!list) {
      list = [];
      this.pending.set(node, list);
    }
    list.push({ keys, token, ttl, answer });
    if (list.length >= RENEWAL_BATCH_MAX && !isCluster(node)) {
      this.pending.delete(node);
      this.send(node, list);
      return;
    }
    const window = Math.min(RENEWAL_WINDOW_MS, ttl * WINDOW_SHARE_OF_TTL);
    const due = performance.now() + window;
    if (due < this.flushAt) this.arm(due, window);
  }

  /** Sends everything queued now. */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.flushAt = Infinity;
    const batches = [...this.pending];
    this.pending.clear();
    for (const [node, list] of batches) this.send(node, list);
  }

  private arm(due: number, window: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.flushAt = due;
    this.timer = setTimeout(() => this.flush(), Math.max(0, Math.floor(window)));
    this.timer.unref();
  }

  /** One node's queue: calls of up to RENEWAL_BATCH_MAX holds (per slot on a Cluster). */
  private send(node: RedisNode, list: Pending[]): void {
    if (!isCluster(node)) return this.chunks(node, list);
    const bySlot = new Map<number, Pending[]>();
    for (const p of list) {
      const slot = keySlot(p.keys[0]);
      const group = bySlot.get(slot);
      if (group) group.push(p);
      else bySlot.set(slot, [p]);
    }
    for (const group of bySlot.values()) this.chunks(node, group);
  }

  /** One call per RENEWAL_BATCH_MAX holds, or fewer when they hold many keys each. */
  private chunks(node: RedisNode, list: Pending[]): void {
    let from = 0;
    let keys = 0;
    for (let i = 0; i < list.length; i++) {
      keys += list[i].keys.length;
      if (i + 1 - from === RENEWAL_BATCH_MAX || keys >= RENEWAL_KEYS_MAX) {
        this.call(node, list.slice(from, i + 1));
        from = i + 1;
        keys = 0;
      }
    }
    if (from < list.length) this.call(node, from === 0 ? list : list.slice(from));
  }

  private call(node: RedisNode, batch: Pending[]): void {
    const keys: string[] = [];
    const args: (string | number)[] = [this.repair];
    for (const p of batch) {
      for (const k of p.keys) keys.push(k);
      args.push(p.token, p.ttl, p.keys.length);
    }
    this.runner.send(node, RENEW_MANY, keys, args, (error, replies) => {
      // A few dozen holds per turn of the event loop: each answer runs its watchdog's code, and
      // 500 at once would hold up timers and I/O for several ms.
      const answer = (from: number) => {
        const to = Math.min(batch.length, from + ANSWERS_PER_TURN);
        for (let i = from; i < to; i++) {
          batch[i].answer(error ?? replies?.[i] ?? new Error('RENEW_MANY: no answer for a hold'));
        }
        if (to < batch.length) setImmediate(answer, to);
      };
      answer(0);
    });
  }
}
