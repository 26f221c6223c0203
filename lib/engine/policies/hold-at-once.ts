import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { GRANT_CLAIM_MS } from '../../redis/script-constants';
import type { Taken } from '../../redis/lock-protocol';
import { isCluster, type RedisNode } from '../../redis/redis-node';
import { ServerClock } from '../../redis/server-clock';
import { claimWindow, type LeaseTaker, type Leases } from '../lease';
import type { GrantedKey } from '../waiter';

/**
 * Policy `holdAtOnce`: a grant message held at once, without waiting for its claim. Only when
 * the message carries the server's clock at the grant (`serverMs`, read before the key was set
 * for the claim window) and this process has a bound on that clock (`ServerClock`). The window
 * then surely runs until a local moment computed here; the lease ends there (less the drift
 * allowance), and only a grant with at least half of its window ahead is held this way: one read
 * late (a stalled event loop, a starved CPU) is claimed first, as any grant without the time.
 * The claim is sent before the holder's method starts (`claimNow`: not deferred past it, since a
 * method that blocks the event loop for longer than the window would then hold a key Redis let
 * go). A lost claim ends the lease when it answers (its watchdog is told through
 * `Lease.watcher`); a failing one lets the lease end with the window.
 *
 * Built by `Grants` only when its switch is on (`EnginePolicies.holdAtOnce`, checked there
 * once); the waits then ask it (`taken`) before they claim a grant the plain way. Dropping the
 * policy is deleting this file, `server-clock.ts` and that switch (the waits' optional `atOnce`
 * hooks and the `claimNow` branch of `claimBeside` then go unused).
 * @internal
 */
export class HoldAtOnce {
  private readonly clock: ServerClock;

  private constructor(
    node: Redis,
    private readonly leases: Pick<Leases, 'validUntil'>,
  ) {
    this.clock = new ServerClock(node);
  }

  /**
   * The policy for a group's nodes, when it can run: one plain node (a quorum's grants carry no
   * one clock, and a Cluster node's clock is not bounded here).
   */
  static of(
    nodes: readonly RedisNode[],
    leases: Pick<Leases, 'validUntil'>,
  ): HoldAtOnce | undefined {
    if (nodes.length !== 1 || isCluster(nodes[0])) return undefined;
    return new HoldAtOnce(nodes[0], leases);
  }

  /** A grant may come (a wait listens for one): the clock bound is kept fresh. */
  expectGrants(): void {
    this.clock.refresh();
  }

  /**
   * A grant message held at once (exclusive or shared): its claim window, timed from where it
   * surely began on this process's clock, its claim to go out before the holder runs. Undefined
   * when it must be claimed first: no server time in the message, no bound on the server's clock
   * yet, replicas to acknowledge (a failover may lose the grant), or less than half of the
   * window surely ahead.
   */
  taken(taker: LeaseTaker, grant: GrantedKey): Taken | undefined {
    if (grant.serverMs === undefined || taker.acks) return undefined;
    const claim = Math.min(taker.ttl, GRANT_CLAIM_MS);
    const end = this.clock.localBefore(grant.serverMs + claim);
    if (end === undefined) return undefined;
    const start = end - claim;
    if (this.leases.validUntil(start, claim) - performance.now() < claim / 2) return undefined;
    return { ...claimWindow(grant, start, taker.ttl), claimNow: true };
  }
}
