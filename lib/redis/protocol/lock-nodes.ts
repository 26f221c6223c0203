import type { KeySpace } from './key-space';
import { NodeRestarts } from './node-restarts';
import { Quorum } from './quorum';
import type { RedisNode } from './redis-node';
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
   * `ScriptRunner.runInPlace`).
   */
  undo(node: RedisNode, keys: readonly string[], token: string): void {
    this.undoUnits(node, this.space.units(keys), token);
  }

  /** `undo` of some of the units of keys a round sent (a Cluster round stopped part way). */
  undoUnits(node: RedisNode, units: string[][], token: string): void {
    for (const unit of units) {
      this.runner
        .runInPlace(node, RELEASE, unit, [token, '1', this.settings.block, this.fenceMode])
        .catch(() => undefined);
    }
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
