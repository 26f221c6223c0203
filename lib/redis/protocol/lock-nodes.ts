import type { KeySpace } from './key-space';
import { NodeRestarts } from './node-restarts';
import { Quorum } from './quorum';
import { isCluster, type RedisNode } from './redis-node';
import { asError, type ScriptRunner } from './script-runner';
import { type FenceMode, RELEASE } from './scripts';

export interface LockProtocolSettings {
  /**
   * Fences reserved per single-key lease on a single node (a fair group: waiters queue in Redis
   * and releases grant): the holder's and one per handoff.
   */
  readonly block: number;
  /** The drift allowance of a lease of `ttl` ms. */
  drift(ttl: number): number;
  /** The group's default lease in ms: the longest lease in use is at least this. */
  readonly ttl: number;
  /** Upper bound of one round trip in ms. */
  readonly commandTimeout: number;
}

/**
 * A group's nodes as every round over them sees them: where scripts go (`runner`), how keys are
 * named (`space`), how votes count (`quorum`), which nodes may vote for a new lock (`restarts`),
 * and how what a token took is given back.
 * @internal
 */
export class LockNodes {
  readonly quorum: Quorum;
  readonly restarts: NodeRestarts;
  /**
   * Per token, its undos a Cluster client may still send (see `undosOf`): empty but while a
   * Cluster fails over, so the plain path costs one size check.
   */
  private readonly undoing = new Map<string, Promise<void>>();

  constructor(
    readonly nodes: readonly RedisNode[],
    readonly space: KeySpace,
    readonly runner: ScriptRunner,
    readonly settings: LockProtocolSettings,
  ) {
    this.quorum = new Quorum(nodes.length);
    const { ttl, commandTimeout } = settings;
    this.restarts = new NodeRestarts(nodes, ttl, (t) => settings.drift(t), commandTimeout);
  }

  /**
   * Whether the group is one node: its answer decides (no vote to count), and it is fair
   * (waiters queue in Redis and releases grant, FIFO across processes).
   */
  get single(): boolean {
    return this.nodes.length === 1;
  }

  /**
   * How the scripts mint fences: on a single node also above the server's clock (a promoted
   * replica may hold an older counter); a quorum counts only (its nodes' clocks differ, and a
   * missing counter is seeded).
   */
  get fenceMode(): FenceMode {
    return this.single ? 'clock' : 'count';
  }

  /**
   * Gives back what `token` holds or has queued on one node (fire and forget), on its connection
   * after whatever the token sent there before and before whatever it sends next (as EVAL: see
   * `ScriptRunner.runInPlace`). On a Cluster that order does not hold (the client re-sends a
   * command on its own timers during a failover): the token's next round waits for the undo
   * (`undosOf`).
   */
  undo(node: RedisNode, keys: readonly string[], token: string): void {
    this.undoUnits(node, this.space.units(keys), token);
  }

  /** `undo` of some of the units of keys a round sent (a Cluster round stopped part way). */
  undoUnits(node: RedisNode, units: string[][], token: string): void {
    for (const unit of units) {
      const { block } = this.settings;
      const done = this.runner.runInPlace(node, RELEASE, unit, [token, '1', block, this.fenceMode]);
      if (isCluster(node)) this.track(token, done);
    }
  }

  /**
   * Resolves once every undo of `token` sent to a Cluster so far is done in the driver (it ran,
   * or the client stopped re-sending it); undefined when none is left. A Cluster client re-sends
   * a command answered CLUSTERDOWN, TRYAGAIN or MOVED on its own timers, long after
   * `commandTimeout`, and its re-sends keep no order with the commands sent since: an undo sent
   * before the token's next round could run after it and free the key that round took (a
   * second holder). So no round of the token goes out before this resolves. A single server, a
   * quorum's node or a Sentinel's master keeps one connection's order (a reconnect re-sends
   * what was unanswered, in order), and a frozen one would hold this for as long as it is
   * frozen: not tracked there.
   */
  undosOf(token: string): Promise<void> | undefined {
    return this.undoing.size === 0 ? undefined : this.undoing.get(token);
  }

  private track(token: string, done: Promise<void>): void {
    const before = this.undoing.get(token);
    const all: Promise<void> = (before ? Promise.all([before, done]) : done).then(() => {
      if (this.undoing.get(token) === all) this.undoing.delete(token);
    });
    this.undoing.set(token, all);
  }

  /** `undo` on every node at once. */
  abandon(keys: readonly string[], token: string): void {
    for (const node of this.nodes) this.undo(node, keys, token);
  }

  /** Runs `fn` on every node and waits for every answer; an error becomes the node's answer. */
  onEvery<T>(fn: (node: RedisNode) => Promise<T>): Promise<(T | Error)[]> {
    return Promise.all(
      this.nodes.map((node) =>
        fn(node).then(
          (v) => v,
          (e: unknown) => asError(e),
        ),
      ),
    );
  }
}
