import type * as Zk from 'node-zookeeper-client';
import { guardDriver } from './driver-guard';
import { ZK_NO_ANSWER, ZK_NOT_CONNECTED, ZK_SESSION_EXPIRED } from './zookeeper.messages';

/** The driver, loaded by the factory (an optional peer). @internal */
export type ZooKeeperDriver = typeof Zk;

/** A ZooKeeper error code (the driver's `Exception`), if `error` is one. @internal */
export function zkCode(error: unknown): number | undefined {
  const code = (error as { getCode?: () => unknown } | null)?.getCode?.();
  return typeof code === 'number' ? code : undefined;
}

/** The error codes the lock recipe reacts to (ZooKeeper's `KeeperException.Code`). @internal */
export const ZK = {
  CONNECTION_LOSS: -4,
  NO_NODE: -101,
  NODE_EXISTS: -110,
  NOT_EMPTY: -111,
  SESSION_EXPIRED: -112,
} as const;

/** How long `close` waits for the ensemble to confirm the session's end. */
const CLOSE_GRACE_MS = 1_000;

/** A call that never went out: no connection within its time (nothing can have happened). */
export class NotConnectedError extends Error {
  constructor(connectString: string, ms: number) {
    super(ZK_NOT_CONNECTED(connectString, ms));
    this.name = 'NotConnectedError';
  }
}

/** What the session tells its owner. @internal */
export interface SessionListener {
  /** The session is over (expired on the ensemble): every ephemeral node of it is gone. */
  sessionEnded(cause: Error): void;
  /**
   * The ensemble answered the liveness probe: the session lives at least a session timeout past
   * `confirmedAt` (told every third of the session timeout while connected).
   */
  sessionConfirmed(): void;
}

/** The `socket` of the driver's connection manager (see `reconnect`). */
interface DriverInternals {
  connectionManager?: { socket?: { destroy(): void } };
}

/**
 * One ZooKeeper session (the lease of every hold of a group) over `node-zookeeper-client`, with
 * what that driver lacks:
 * - every call is bounded (`commandTimeout`), waiting for a connection no longer than that;
 * - a member that stops answering without closing the connection (frozen, partitioned) is left:
 *   the driver pings but never notices missing answers, so a call or the liveness probe that
 *   times out drops the connection and the driver moves to the next member, same session;
 * - an expired session is replaced by a new one (the holds of the old one are over).
 * @internal
 */
export class ZooKeeperSession {
  private client: Zk.Client;
  private connected = false;
  /** Waits for a connection: called with nothing once connected, with an error at close. */
  private waiting: ((error?: Error) => void)[] = [];
  private probe?: NodeJS.Timeout;
  private stall?: NodeJS.Timeout;
  private closed = false;
  /** The session timeout the ensemble agreed to (the requested one until first connected). */
  private negotiated: number;
  /**
   * When the last call that got an answer was sent (`performance.now()`): the ensemble heard
   * from the session after it, so the session lives at least a session timeout beyond it.
   */
  confirmedAt = -Infinity;

  constructor(
    private readonly zk: ZooKeeperDriver,
    readonly connectString: string,
    private readonly sessionTimeout: number,
    private readonly commandTimeout: number,
    private readonly listener: SessionListener,
  ) {
    this.negotiated = sessionTimeout;
    this.client = this.open();
  }

  /**
   * The negotiated session timeout (the requested one until first connected). Kept while
   * disconnected: the ensemble expires the session by the timeout it agreed to.
   */
  get timeout(): number {
    return this.negotiated;
  }

  get isConnected(): boolean {
    return this.connected;
  }

  /**
   * Whether the node of `stat` is an ephemeral node of this session. A name is not enough: a
   * process whose random instance id is the same as this one's makes the same tokens.
   */
  owns(stat: Zk.Stat | undefined): boolean {
    return (
      stat !== undefined && stat !== null && stat.ephemeralOwner.equals(this.client.getSessionId())
    );
  }

  /** Resolves once connected, or rejects after `ms` with why not. */
  ready(ms: number): Promise<void> {
    if (this.connected) return Promise.resolve();
    if (this.closed) return Promise.reject(new NotConnectedError(this.connectString, 0));
    return new Promise((resolve, reject) => {
      const started = performance.now();
      const waiter = (error?: Error) => {
        clearTimeout(timer);
        if (error) reject(error);
        else resolve();
      };
      const timer = setTimeout(() => {
        this.waiting = this.waiting.filter((w) => w !== waiter);
        reject(new NotConnectedError(this.connectString, performance.now() - started));
      }, ms);
      // A wait must not keep the process alive by itself (housekeeping waits long).
      timer.unref();
      this.waiting.push(waiter);
    });
  }

  /**
   * Runs one call of the driver once connected, bounded by `commandTimeout` in all. A call that
   * gets no answer in time drops the connection (see the class).
   */
  run<T>(
    call: (client: Zk.Client, done: (error: unknown, value?: T) => void) => void,
    idempotent = true,
  ): Promise<T> {
    const started = performance.now();
    // Hot path: connected, the call goes out now (no wait, no extra promise).
    const first = this.connected
      ? this.send(call, this.commandTimeout)
      : this.ready(this.commandTimeout).then(() => this.send(call, this.left(started)));
    if (!idempotent) return first;
    // A connection that broke under the call (a member gone): once more on the next member,
    // within the same commandTimeout. Only for calls that may safely run twice.
    return first.catch((error: unknown) => {
      if (zkCode(error) !== ZK.CONNECTION_LOSS || this.left(started) <= 1) throw error;
      return this.ready(this.left(started)).then(() => this.send(call, this.left(started)));
    });
  }

  /** What is left of a commandTimeout that began at `started`. */
  private left(started: number): number {
    return Math.max(1, this.commandTimeout - (performance.now() - started));
  }

  private send<T>(
    call: (client: Zk.Client, done: (error: unknown, value?: T) => void) => void,
    timeout: number,
  ): Promise<T> {
    const client = this.client;
    const sentAt = performance.now();
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(ZK_NO_ANSWER(this.connectString, this.commandTimeout)));
        if (client === this.client) this.reconnect();
      }, timeout);
      call(client, (error, value) => {
        clearTimeout(timer);
        if (error) reject(this.explain(error));
        else {
          if (sentAt > this.confirmedAt) this.confirmedAt = sentAt;
          resolve(value as T);
        }
      });
    });
  }

  /** Ends the session (its ephemeral nodes go at once). */
  close(): void {
    this.closed = true;
    clearInterval(this.probe);
    clearInterval(this.stall);
    const waiting = this.waiting;
    this.waiting = [];
    for (const fail of waiting) fail(new NotConnectedError(this.connectString, 0));
    this.connected = false;
    this.client.close();
    // The driver sends closeSession and waits for the answer; a member that never answers (or
    // no member at all) must not keep the process alive.
    const client = this.client as unknown as DriverInternals;
    setTimeout(() => client.connectionManager?.socket?.destroy(), CLOSE_GRACE_MS).unref();
  }

  private open(): Zk.Client {
    const client = this.zk.createClient(this.connectString, {
      sessionTimeout: this.sessionTimeout,
      // The driver's retries would wait seconds; calls are bounded here instead.
      retries: 0,
      spinDelay: 100,
    });
    // A reply the driver cannot read must not end the process (see guardDriver).
    guardDriver(client, this.connectString);
    client.on('connected', () => {
      if (client !== this.client) return;
      this.connected = true;
      const negotiated = client.getSessionTimeout();
      if (negotiated !== this.negotiated) {
        this.negotiated = negotiated;
        this.startProbe(client);
      }
      clearInterval(this.stall);
      this.stall = undefined;
      const waiting = this.waiting;
      this.waiting = [];
      for (const wake of waiting) wake();
    });
    client.on('disconnected', () => {
      if (client !== this.client) return;
      this.connected = false;
      this.watchReconnect(client);
    });
    client.on('expired', () => {
      if (client !== this.client || this.closed) return;
      this.connected = false;
      client.close();
      this.client = this.open();
      this.listener.sessionEnded(new Error(ZK_SESSION_EXPIRED(this.connectString)));
    });
    client.connect();
    this.startProbe(client);
    return client;
  }

  /**
   * A read every third of the session timeout: without it a member that froze would hold the
   * connection (and the holders' renewals) until the session expired on the others. Its answer
   * confirms the session (the holds' leases move with it).
   */
  private startProbe(client: Zk.Client): void {
    clearInterval(this.probe);
    this.probe = setInterval(
      () => {
        if (!this.connected || client !== this.client) return;
        this.run((c, done) => c.exists('/', (e, stat) => done(e, stat))).then(
          () => {
            if (client === this.client && !this.closed) this.listener.sessionConfirmed();
          },
          () => undefined,
        );
      },
      Math.max(50, Math.floor(this.negotiated / 3)),
    );
    this.probe.unref();
  }

  /**
   * While disconnected, the connection attempt is dropped every `commandTimeout`: the driver
   * times out a TCP connect but never the handshake after it, so a member that accepts
   * connections and never answers (frozen) would hold the session there.
   */
  private watchReconnect(client: Zk.Client): void {
    if (this.stall || this.closed) return;
    this.stall = setInterval(() => {
      if (this.connected || client !== this.client || this.closed) {
        clearInterval(this.stall);
        this.stall = undefined;
        return;
      }
      this.reconnect();
    }, this.commandTimeout);
    this.stall.unref();
  }

  /** Drops the connection; the driver reconnects to the next member with the same session. */
  private reconnect(): void {
    this.connected = false;
    (this.client as unknown as DriverInternals).connectionManager?.socket?.destroy();
  }

  private explain(error: unknown): unknown {
    if (zkCode(error) === ZK.SESSION_EXPIRED) {
      return new Error(ZK_SESSION_EXPIRED(this.connectString));
    }
    return error;
  }
}
