import { performance } from 'node:perf_hooks';
import { closeConnection, reviveWhenEnded } from './redis-connection';
import { isCluster, type RedisNode } from './redis-node';

type Listener = (message: string) => void;

const noop = (): void => undefined;
const RESOLVED: Promise<void> = Promise.resolve();
const closedError = (): Error => new Error('the subscriber connection closed');
const allDownError = (): Error => new Error('no Redis node of the group accepts subscriptions');
/** A reply error is the server refusing the command (an ACL, say), not a lost connection. */
const isRefusal = (error: unknown): error is Error =>
  error instanceof Error && error.name === 'ReplyError';
/**
 * A quorum release publishes on each node it frees the key on, all at once: the same message
 * from another node within this time is that release again, not a new one.
 */
const ECHO_MS = 50;

/** A key channel and its listeners in this process. */
class Channel {
  readonly listeners = new Set<Listener>();
  /** Settles once a node confirms the subscription, or no node can take it. */
  ready: Promise<void>;
  private pending = true;
  private failed = false;
  private resolve!: () => void;
  private reject!: (error: Error) => void;
  /** Nodes that refused the SUBSCRIBE. */
  private refusals = 0;
  /** The last message delivered, when, and the nodes (bits) it came from since. */
  private last?: string;
  private lastAt = 0;
  private heard = 0;

  constructor(
    readonly name: string,
    private readonly nodes: number,
  ) {
    this.ready = new Promise<void>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }

  /** A node subscribed it: `ready` resolves (after a failure: the next listeners' `ready` does). */
  readonly confirm = (): void => {
    if (this.pending) {
      this.pending = false;
      this.resolve();
    } else if (this.failed) {
      this.failed = false;
      this.ready = RESOLVED;
    }
  };

  /** A node's SUBSCRIBE failed: a lost connection resubscribes; a refusal by every node fails. */
  readonly refused = (error: unknown): void => {
    if (isRefusal(error) && ++this.refusals >= this.nodes) this.fail(error);
  };

  fail(error: Error): void {
    if (!this.pending) return;
    this.pending = false;
    this.failed = true;
    // The callers fall back to polling; one that never looks at `ready` must not leave an
    // unhandled rejection.
    this.ready.catch(noop);
    this.reject(error);
  }

  /**
   * Whether `message` from the node `bit` is another node's copy of the one just delivered (one
   * release, one wake-up). A node heard twice is a new release; so is the same message later.
   */
  echoes(message: string, bit: number): boolean {
    const now = performance.now();
    if (
      bit !== 0 &&
      (this.heard & bit) === 0 &&
      message === this.last &&
      now - this.lastAt < ECHO_MS
    ) {
      this.heard |= bit;
      return true;
    }
    this.last = message;
    this.lastAt = now;
    this.heard = bit;
    return false;
  }
}

/** The subscriber connection to one node of the group. */
interface NodeSubscriber {
  readonly conn: RedisNode;
  /**
   * A Redis Cluster client keeps its own subscriptions across reconnects (and queues commands
   * while it reconnects): it is resubscribed by ioredis, not here.
   */
  readonly cluster: boolean;
  /** SUBSCRIBE / UNSUBSCRIBE may be sent: connected, and the anchor subscription went first. */
  live: boolean;
  /** The anchor subscription is confirmed on the current connection. */
  up: boolean;
  /** Its last connection attempt failed or its connection closed, and none succeeded since. */
  down: boolean;
  /** Counts connections, so a late reply of an earlier one is ignored. */
  epoch: number;
}

/**
 * Wake-ups for waiters: per client group one subscriber connection to each of its nodes (not one
 * per waiter). Each is always subscribed to the group's own channel, where releases send the
 * grants meant for its tokens (so a grant reaches only the process it is for), and to a key's
 * release channel only while a caller of this process races for that key (quorum and multi-key
 * waits). The last waiter to leave unsubscribes, so millions of keys over time leave nothing
 * behind.
 *
 * A quorum release publishes on every node it frees the key on, and any one of them is enough to
 * wake the waiters: a node that is down, or still connecting, delays nobody. Its connection
 * resubscribes every channel this process still listens to when it comes back (and only those:
 * a channel left while it was down is not restored, as ioredis' own `autoResubscribe` would).
 * @internal
 */
export class LockNotifier {
  /** One per node, created on first use. */
  private subs?: NodeSubscriber[];
  private readonly channels = new Map<string, Channel>();
  /** Nodes with the anchor subscription confirmed right now. */
  private upCount = 0;
  /** Since when (performance.now()) some node has had it confirmed without a gap; or Infinity. */
  private upSince = Infinity;
  /** Nodes that failed to connect (or lost their connection) and have not come back. */
  private downCount = 0;
  /** `ready()` callers while no node is up yet. */
  private opening?: { promise: Promise<void>; resolve: () => void; reject: (e: Error) => void };
  private closed = false;

  /**
   * @param sources the group's nodes; the subscribers are duplicates of their connections
   * @param own the group's own channel, subscribed for the connection's life
   * @param onOwn called with each message of that channel
   */
  constructor(
    private readonly sources: readonly RedisNode[],
    private readonly onError: (error: Error) => void,
    private readonly own: string,
    private readonly onOwn: (message: string) => void,
  ) {}

  /**
   * Resolves once a node's subscriber is connected and subscribed to the own channel (connecting
   * them if needed): from then on, grants for this group's tokens are heard. Rejects when no node
   * can subscribe (each failed to connect), so callers poll instead.
   */
  ready(): Promise<void> {
    if (this.closed) return Promise.reject(closedError());
    const subs = this.open();
    if (this.upCount > 0) return RESOLVED;
    if (this.downCount === subs.length) return Promise.reject(allDownError());
    if (!this.opening) {
      let resolve!: () => void;
      let reject!: (e: Error) => void;
      const promise = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      promise.catch(noop);
      this.opening = { promise, resolve, reject };
    }
    return this.opening.promise;
  }

  /**
   * Subscribes to the own channel in the background unless subscribed already (for notices that
   * are worth hearing but nobody waits for: a failure only means they are not heard).
   */
  listenInBackground(): void {
    if (this.upCount === 0) this.ready().catch(() => undefined);
  }

  /** Whether some node's subscriber is subscribed to the own channel right now. */
  get listening(): boolean {
    return this.upCount > 0;
  }

  /**
   * Whether every message on the own channel published since `time` (performance.now()) has
   * been heard: a node's subscription was confirmed before it and some node kept one since.
   */
  heardSince(time: number): boolean {
    return this.upSince <= time;
  }

  /** Subscribed key channels (for tests: empty once every waiter left). */
  get size(): number {
    return this.channels.size;
  }

  /**
   * Calls `listener` with each message of a key's `channel` (`r`: released, for racing
   * waiters) until the returned `stop` is called. With several nodes, a message published on
   * each of them at once is delivered once (see `ECHO_MS`), and at most once per node.
   * `ready` resolves once the subscription is active on a node (a release before that is not
   * seen, so callers try the lock once more after `ready`); it rejects when no node can take it.
   */
  listen(channel: string, listener: Listener): { ready: Promise<void>; stop: () => void } {
    const e = this.channels.get(channel) ?? this.subscribe(channel);
    e.listeners.add(listener);
    let stopped = false;
    return {
      ready: e.ready,
      stop: () => {
        if (stopped) return;
        stopped = true;
        e.listeners.delete(listener);
        if (e.listeners.size === 0 && this.channels.get(channel) === e) {
          this.channels.delete(channel);
          // Commands on one connection run in order, so a later SUBSCRIBE of the same channel
          // lands after this UNSUBSCRIBE. A node that is not connected has nothing to undo: it
          // resubscribes only the channels still listened to.
          for (const sub of this.subs ?? []) {
            if (this.canSend(sub)) sub.conn.unsubscribe(channel).catch(noop);
          }
        }
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    const subs = this.subs ?? [];
    this.subs = undefined;
    this.opening?.reject(closedError());
    this.opening = undefined;
    for (const entry of this.channels.values()) entry.fail(closedError());
    this.channels.clear();
    await Promise.all(
      subs.map((sub) => {
        // Waiting for a reconnect only to QUIT would hold the shutdown up: stop the retries.
        if (!sub.cluster && (sub.conn.status === 'reconnecting' || sub.conn.status === 'close')) {
          sub.conn.disconnect();
          return undefined;
        }
        return closeConnection(sub.conn);
      }),
    );
  }

  private subscribe(name: string): Channel {
    const entry = new Channel(name, this.sources.length);
    this.channels.set(name, entry);
    if (this.closed) {
      entry.fail(closedError());
      return entry;
    }
    const subs = this.open();
    // Nodes still connecting subscribe it with the rest once they are ready.
    for (const sub of subs) {
      if (this.canSend(sub)) sub.conn.subscribe(name).then(entry.confirm, entry.refused);
    }
    if (this.downCount === subs.length) entry.fail(allDownError());
    return entry;
  }

  private canSend(sub: NodeSubscriber): boolean {
    return sub.live && (sub.cluster || sub.conn.status === 'ready');
  }

  private open(): NodeSubscriber[] {
    this.subs ??= this.sources.map((source, i) => this.connect(source, i));
    return this.subs;
  }

  private connect(source: RedisNode, index: number): NodeSubscriber {
    const cluster = isCluster(source);
    // A duplicate shares the node's address and options. No offline queue (but for a Cluster,
    // see `NodeSubscriber.cluster`): a command for a node that is down fails at once rather than
    // piling up, and what it missed is sent again from `channels` when it is back, so ioredis
    // must not resubscribe or resend on its own (it would restore channels left meanwhile).
    const conn = (
      isCluster(source)
        ? source.duplicate(undefined, { enableOfflineQueue: true })
        : source.duplicate({
            enableOfflineQueue: false,
            autoResubscribe: false,
            autoResendUnfulfilledCommands: false,
            lazyConnect: false,
          })
    ) as RedisNode;
    const sub: NodeSubscriber = { conn, cluster, live: false, up: false, down: false, epoch: 0 };
    // A node that stays down fails every reconnect: reported once per outage.
    conn.on('error', (err: Error) => {
      if (!sub.down) this.onError(err);
    });
    conn.on('ready', () => this.resubscribe(sub));
    if (!cluster) conn.on('close', () => this.lost(sub));
    conn.on('end', () => this.lost(sub));
    reviveWhenEnded(conn, () => this.closed);
    // Past 31 nodes no bit: their copies of a release are delivered too (the wake is a latch).
    const bit = index < 31 ? 1 << index : 0;
    conn.on('message', (channel: string, message: string) => this.deliver(channel, message, bit));
    return sub;
  }

  /**
   * A connection is ready: subscribe the own channel and every key channel still listened to,
   * in one command. The own channel goes first and stays for the connection's life: it anchors
   * the connection, since when the last channel is unsubscribed while another SUBSCRIBE is in
   * flight, ioredis leaves subscriber mode and the messages of the new channel are lost.
   */
  private resubscribe(sub: NodeSubscriber): void {
    if (this.closed || (sub.cluster && sub.live)) return;
    if (sub.down) {
      sub.down = false;
      this.downCount--;
    }
    sub.live = true;
    const epoch = ++sub.epoch;
    const batch = [...this.channels.values()];
    const names = [this.own];
    for (const entry of batch) names.push(entry.name);
    sub.conn.subscribe(...names).then(
      () => {
        if (this.closed || sub.epoch !== epoch || !sub.live) return;
        if (!sub.up) {
          sub.up = true;
          if (this.upCount++ === 0) this.upSince = performance.now();
        }
        for (const entry of batch) entry.confirm();
        const opening = this.opening;
        this.opening = undefined;
        opening?.resolve();
      },
      (err: unknown) => {
        // A lost connection is not this node's answer: it resubscribes once it is back.
        if (this.closed || sub.epoch !== epoch || !isRefusal(err)) return;
        this.onError(err);
        this.lost(sub);
      },
    );
  }

  /** A connection closed, failed to open, or refused the anchor. */
  private lost(sub: NodeSubscriber): void {
    if (this.closed) return;
    sub.live = false;
    if (sub.up) {
      sub.up = false;
      if (--this.upCount === 0) this.upSince = Infinity;
    }
    if (sub.down) return;
    sub.down = true;
    this.downCount++;
    if (this.downCount < this.sources.length) return;
    // No node left to subscribe on: the waiters poll until one is back.
    const opening = this.opening;
    this.opening = undefined;
    opening?.reject(allDownError());
    const error = allDownError();
    for (const entry of this.channels.values()) entry.fail(error);
  }

  private deliver(channel: string, message: string, bit: number): void {
    if (channel === this.own) {
      // Grants come only in single-node groups: nothing to merge.
      return this.onOwn(message);
    }
    const entry = this.channels.get(channel);
    if (!entry || entry.echoes(message, bit)) return;
    for (const l of [...entry.listeners]) l(message);
  }
}
