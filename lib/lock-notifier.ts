import type { Cluster, Redis } from 'ioredis';
import { closeConnection } from './redis-connection';

type RedisNode = Redis | Cluster;

interface Channel {
  listeners: Set<(message: string) => void>;
  ready: Promise<void>;
}

/**
 * Wake-ups for waiters: one subscriber connection per client group (not one per waiter). It is
 * always subscribed to the group's own channel, where releases send the grants meant for its
 * tokens (so a grant reaches only the process it is for), and to a key's release channel only
 * while a caller of this process races for that key (quorum and multi-key waits). The last
 * waiter to leave unsubscribes, so millions of keys over time leave nothing behind.
 * @internal
 */
export class LockNotifier {
  private subscriber?: RedisNode;
  /** Resolves once the subscriber is connected and holds its anchor subscription. */
  private opened?: Promise<void>;
  private readonly channels = new Map<string, Channel>();
  private closed = false;
  /** Messages received (release notifications), for tests and stats. */
  received = 0;

  /**
   * @param own the group's own channel, subscribed for the connection's life
   * @param onOwn called with each message of that channel
   */
  constructor(
    private readonly source: RedisNode,
    private readonly onError: (error: Error) => void,
    private readonly own: string,
    private readonly onOwn: (message: string) => void,
  ) {}

  /**
   * Resolves once the subscriber is connected and subscribed to the own channel (connecting it
   * if needed): from then on, grants for this group's tokens are heard.
   */
  ready(): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the subscriber connection closed'));
    return this.connection().opened;
  }

  /** Subscribed key channels (for tests: empty once every waiter left). */
  get size(): number {
    return this.channels.size;
  }

  /**
   * Calls `listener` with each message of a key's `channel` (`r`: released, for racing
   * waiters) until the returned `stop` is called.
   * `ready` settles once the subscription is active (a release before that is not seen, so
   * callers try the lock once more after `ready`).
   */
  listen(
    channel: string,
    listener: (message: string) => void,
  ): { ready: Promise<void>; stop: () => void } {
    let entry = this.channels.get(channel);
    if (!entry) {
      const { sub, opened } = this.connection();
      const created: Channel = {
        listeners: new Set(),
        // SUBSCRIBE only once the connection is ready: one sent while it opens can be refused
        // ("Connection in subscriber mode, only subscriber commands may be used").
        ready: opened.then(() => sub.subscribe(channel)).then(() => undefined),
      };
      created.ready.catch(() => {
        // Not subscribed: let the next listener try again (these ones fall back to polling).
        if (this.channels.get(channel) === created) this.channels.delete(channel);
      });
      entry = created;
      this.channels.set(channel, entry);
    }
    const e = entry;
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
          // lands after this UNSUBSCRIBE.
          this.subscriber?.unsubscribe(channel).catch(() => undefined);
        }
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    const sub = this.subscriber;
    this.subscriber = undefined;
    this.opened = undefined;
    this.channels.clear();
    if (sub) await closeConnection(sub);
  }

  private connection(): { sub: RedisNode; opened: Promise<void> } {
    if (this.subscriber && this.opened) return { sub: this.subscriber, opened: this.opened };
    // A duplicate shares the node's address and options; the offline queue lets SUBSCRIBE wait
    // for the connection instead of failing while it opens.
    const sub = (
      'isCluster' in this.source && this.source.isCluster
        ? (this.source as Cluster).duplicate(undefined, { enableOfflineQueue: true })
        : (this.source as Redis).duplicate({ enableOfflineQueue: true, lazyConnect: false })
    ) as RedisNode;
    sub.on('error', (err: Error) => this.onError(err));
    // The own channel stays subscribed for the connection's life; it also anchors the
    // connection: when the last channel is unsubscribed while another SUBSCRIBE is in flight,
    // ioredis leaves subscriber mode and the messages of the new channel are lost.
    const anchor = this.own;
    const opened = new Promise<void>((resolve, reject) => {
      if (sub.status === 'ready') resolve();
      sub.once('ready', () => resolve());
      sub.once('end', () => reject(new Error('the subscriber connection closed')));
    }).then(() => sub.subscribe(anchor).then(() => undefined));
    opened.catch(() => undefined);
    this.opened = opened;
    sub.on('message', (channel: string, message: string) => {
      if (channel === anchor) {
        this.received++;
        this.onOwn(message);
        return;
      }
      const entry = this.channels.get(channel);
      if (!entry) return;
      this.received++;
      for (const l of [...entry.listeners]) l(message);
    });
    this.subscriber = sub;
    return { sub, opened };
  }
}
