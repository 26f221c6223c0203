import { performance } from 'node:perf_hooks';
import type { LockNotifier } from './protocol/lock-notifier';
import type { LockProtocol } from './protocol/lock-protocol';
import type { KeyLine as Line } from './key-line';
import type { RedisLease, RedisLeases } from './redis-lease';
import type { LockCounts } from '../core/lock-backend';
import type { Tokens } from './tokens';
import type { Waiter } from './waiter';

type KeyLine = Line<Waiter>;

/**
 * What passing a key on needs of the engine that owns the lines (`RedisLockBackend`): its parts, and
 * its own ways of ending a hold, so that a pass and a release end one the same way.
 * @internal
 */
export interface HandoffEngine {
  readonly protocol: Pick<LockProtocol, 'handoff' | 'refill' | 'releaseTo' | 'abandon'>;
  readonly leases: Pick<RedisLeases, 'passedOn' | 'taken'>;
  readonly tokens: Pick<Tokens, 'hold' | 'drop'>;
  readonly notifier: Pick<LockNotifier, 'listenInBackground' | 'heardSince' | 'listening'>;
  readonly stats: LockCounts;
  /** Single node: releases grant, and past its turn a key goes to another process's waiter. */
  readonly fair: boolean;
  readonly localHandoffs: number;
  /** Whether the backend closed: a key then goes back to Redis, not on. */
  closed(): boolean;
  /** Waits (briefly) for the group's grant channel, unless it is subscribed already. */
  subscribed(): Promise<void>;
  /** The lease is known to be over: its holder's watchdog is told. */
  leaseEnded(lease: RedisLease): void;
  /** The hold of `lease` is over in this process (`wakeHead`: its line's head must try now). */
  holdReturned(lease: RedisLease, wakeHead: (line: KeyLine) => boolean): void;
  /** Gives the key back in Redis. */
  giveBack(lease: RedisLease): Promise<void>;
}

/**
 * How a freed exclusive key goes to the next caller of this process waiting for it: in memory
 * with a spare fence, by HANDOFF, or past its turn to the oldest waiter of another process
 * (RELEASE_TO), and the REFILL of spare fences that keeps a hot key's passes in memory.
 * `RedisLockBackend` owns one and hands it every release with a caller of this process waiting.
 * @internal
 */
export class LocalHandoffs {
  /** Fences a REFILL reserves for a key passed on in memory (single node). */
  private readonly refillBlock: number;
  /** A hold passed on in memory with fewer spare fences than this asks for a REFILL. */
  private readonly refillBelow: number;
  /** The most local passes a turn may make (see `KeyLine.turnBegins`): one refill block. */
  readonly turnPasses: number;

  constructor(private readonly engine: HandoffEngine) {
    // Four blocks' worth: one refill per dozen or so sections of a hot key, well ahead of need.
    this.refillBlock = 4 * (engine.localHandoffs + 1);
    this.refillBelow = Math.ceil((engine.localHandoffs + 1) / 2);
    this.turnPasses = this.refillBlock - 1;
  }

  /**
   * A caller of this process waits for the key: hand it over (in memory, or by HANDOFF) while
   * the bounded barging allows; past it, on a single node, the oldest waiter of another process
   * goes first (RELEASE_TO). On a single node the bound counts only while a waiter of another
   * process is known to be queued: with nobody else waiting the key stays here, passed on in
   * memory (its fences refilled in the background). The line counts the key as held until
   * Redis has it back, so our own head does not compete for a key this process still holds.
   */
  async passOn(lease: RedisLease, line: KeyLine, next: Waiter): Promise<void> {
    const limit = this.engine.localHandoffs;
    // Staying here past the bound needs the notices of other processes: listen (once).
    if (this.engine.fair && limit > 0) this.engine.notifier.listenInBackground();
    // Past the bound only while this process heard every notice since nobody else was queued
    // (a notice lost while its subscriber reconnected would otherwise keep the key here), and
    // for QUIET_PROOF_MS at most: then the key goes public once more, which proves it again (a
    // notice can be lost without the subscriber noticing, as in a failover).
    const { quietSince } = line;
    const quiet =
      this.engine.fair &&
      performance.now() - quietSince < QUIET_PROOF_MS &&
      this.engine.notifier.heardSince(quietSince);
    if (line.mayHandOff(limit, quiet) && performance.now() < lease.validUntil) {
      const refilling = lease.spare <= 0 && !next.enqueued ? line.refilling : undefined;
      if (refilling) {
        // The callers ran through the block before the refill came back: wait for it (a round
        // trip, as a HANDOFF would be) rather than pass by HANDOFF, whose new token would lose
        // the refill's block; then decide again (it may say others are queued).
        await refilling;
        return this.passOnAgain(lease, line);
      }
      const inMemory = next.enqueued ? undefined : this.engine.leases.passedOn(lease, next);
      const handed = inMemory ?? (await this.handoff(lease, next));
      if (handed) {
        line.handedOff();
        this.engine.stats.localHandoffs++;
        if (inMemory) this.refill(line, inMemory);
        return this.handTo(lease, handed, line, next);
      }
    } else if (this.engine.fair) {
      // RELEASE_TO may queue the next caller in Redis behind another process's waiter: its grant
      // then comes as a message on this process's channel, which must be heard (with
      // localHandoffs 0 nothing else made this process listen). No wait once it listens.
      if (!this.engine.notifier.listening) await this.engine.subscribed();
      // Not while the next caller's own attempt is on its way (see `Waiter.passStarts`).
      if (next.passStarts()) return this.releaseTo(lease, line, next);
    }
    return this.engine.giveBack(lease);
  }

  /**
   * RELEASE_TO (single node): the key to the oldest waiter of another process, `next` queued
   * behind it; or, with nobody else queued, to `next`. The pass to `next` has started.
   */
  private async releaseTo(lease: RedisLease, line: KeyLine, next: Waiter): Promise<void> {
    const mark = line.noticeMark();
    const sentAt = performance.now();
    const r = await this.engine.protocol
      .releaseTo(lease.keys, lease.token, next, next.acks)
      .catch(() => {
        // Whatever it did is unknown: the next caller's token must not keep the key (its own
        // next attempt goes after this undo on the connection).
        this.engine.protocol.abandon(lease.keys, next.token);
        return 'notOurs' as const;
      });
    line.wentPublic();
    if (r === 'granted') {
      // Granted to another process; ours queued behind it, so a grant is on its way to it.
      this.engine.tokens.drop(lease.token);
      next.enqueued = true;
      next.queuedByHolder = true;
      next.passEnded();
      this.engine.holdReturned(lease, () => false);
      return;
    }
    if (r !== 'notOurs') {
      // Nobody else was queued: the key stays here until someone is (heard by a notice: this
      // process listens since the start of this passOn).
      line.nobodyElseSince(mark, sentAt);
      this.engine.stats.localHandoffs++;
      this.engine.tokens.hold(next.token);
      return this.handTo(lease, this.engine.leases.taken(lease.keys, next, r), line, next);
    }
    next.passEnded();
    return this.engine.giveBack(lease);
  }

  /** passOn after a wait: to the head of the line now, or back to Redis if nobody waits. */
  private passOnAgain(lease: RedisLease, line: KeyLine): Promise<void> {
    const head = line.head;
    if (head && !this.engine.closed()) return this.passOn(lease, line, head);
    return this.engine.giveBack(lease);
  }

  /** The key passed from `lease` to `handed` for `next`; given back if `next` left meanwhile. */
  private handTo(
    lease: RedisLease,
    handed: RedisLease,
    line: KeyLine,
    next: Waiter,
  ): Promise<void> {
    line.passHold(lease, handed);
    if (handed.token !== lease.token) this.engine.tokens.drop(lease.token);
    if (next.handOver(handed)) return Promise.resolve();
    // The waiter gave up while the handoff was in flight: release what it was given.
    handed.released = true;
    return this.engine.giveBack(handed);
  }

  /**
   * The key went on in memory with `lease` (`line` still lists its new holder) and its spare
   * fences run low for the callers waiting: more are reserved in
   * the background (REFILL, one round trip while the callers hold), so the next passes need
   * none. The answer goes to whichever hold of the token is current by then; it also says
   * whether a waiter of another process is queued (a notice lost on the way is caught here).
   */
  private refill(line: KeyLine, lease: RedisLease): void {
    // Not while the callers already waiting fit in the spare fences, nor with others waiting
    // when the passes left before the key goes public fit in them.
    if (lease.spare >= this.refillBelow || line.length - 1 <= lease.spare) return;
    if (line.refilling) return;
    if (line.othersMayWait && line.passesLeft(this.engine.localHandoffs) <= lease.spare) return;
    // A block for every caller waiting now (a long line costs one round trip, not one per block).
    const count = Math.min(Math.max(this.refillBlock, line.length), MAX_REFILL);
    const mark = line.noticeMark();
    const sentAt = performance.now();
    line.refillOnce(() =>
      this.engine.protocol.refill(lease.keys, lease.token, count, lease.acks).then(
        (r) => {
          // The token's hold now, even if it was let go and waits in passOn for this block.
          const current = line.leaseOf(lease.token);
          if (r.kind === 'notOurs') {
            // The token lost the key (expired, taken): its hold here proves nothing any more.
            if (current && !current.released) this.engine.leaseEnded(current);
            return;
          }
          if (r.othersQueued) line.othersWait();
          else line.nobodyElseSince(mark, sentAt);
          current?.refilled(r.fence, count);
        },
        () => undefined,
      ),
    );
  }

  /**
   * HANDOFF: the key to `next`'s token in one round trip; undefined if it could not be (what it
   * took is undone then), or if `next` has an attempt of its own on the way (see
   * `Waiter.passStarts`: on a quorum the round waits for every node, and a lease of its own that
   * the waiter took meanwhile with the same token would be undone under it).
   */
  private async handoff(lease: RedisLease, next: Waiter): Promise<RedisLease | undefined> {
    if (!next.passStarts()) return undefined;
    const taken = await this.engine.protocol
      .handoff(lease.keys, lease.token, next, next.acks)
      .catch(() => undefined);
    if (!taken) {
      next.passEnded();
      return undefined;
    }
    this.engine.tokens.hold(next.token);
    return this.engine.leases.taken(lease.keys, next, taken);
  }
}

/**
 * How long a release that found nobody else queued lets a hot key stay in its process past
 * `localHandoffs` (a waiter of another process whose notice was lost waits at most about this).
 */
const QUIET_PROOF_MS = 1_000;

/**
 * The most fences one REFILL reserves (a block covers the callers waiting at the time, at least
 * `4 × (localHandoffs + 1)`): fences are sparse anyway (minted from the server's clock), this only
 * bounds how far one refill moves the counter.
 */
const MAX_REFILL = 1_024;
