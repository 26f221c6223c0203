import { performance } from 'node:perf_hooks';
import type { Etcd3, ILeaseKeepAliveResponse, Lease as EtcdLease } from 'etcd3';

/** Lines whose free names a session keeps (a bound on memory for many keys used once). */
const MAX_FREE_LINES = 1024;
/** Free names kept per line: as many as callers of one process usually wait in it at once. */
const MAX_FREE_PER_LINE = 64;

/** Told once when the session is over (its lease lost, expired, or revoked by `close`). */
export interface SessionListener {
  sessionEnded(session: EtcdSession, cause: Error): void;
  /** The lease was renewed: it lasts until `validUntil` at least. */
  sessionRenewed(session: EtcdSession): void;
}

/**
 * The lease of this process in etcd (Go's `concurrency.Session`): every hold and waiting place
 * of a backend is a key bound to it, so a process that dies frees them all when the lease runs
 * out. etcd3's own keep-alive renews it every third of its TTL; this class only keeps count of
 * until when it is certainly alive (`validUntil`, on the `performance.now()` clock: the time a
 * keep-alive was sent, plus the TTL etcd answered, less the drift allowance) and ends it when
 * that passes with no renewal, without waiting for etcd3 to give up (it waits twice the TTL).
 * @internal
 */
export class EtcdSession {
  /** Until when the lease is certainly alive in etcd. */
  validUntil: number;
  ended = false;
  /** The lease ID in hex: the middle of the name of every key of this session. */
  readonly hex: string;
  private count = 0;
  /** Per line (and part), names of deleted keys of this session to use again. */
  private readonly free = new Map<string, string[]>();
  /** When each keep-alive not answered yet was sent (etcd answers them in order). */
  private readonly sent: number[] = [];
  private timer?: NodeJS.Timeout;

  private constructor(
    private readonly lease: EtcdLease,
    /** The lease ID, as etcd3 gives it (decimal). */
    readonly id: string,
    grantedAt: number,
    ttlSeconds: number,
    private readonly drift: number,
    private readonly listener: SessionListener,
  ) {
    this.hex = BigInt(id).toString(16);
    this.validUntil = grantedAt + ttlSeconds * 1000 - drift;
    lease.on('keepaliveEstablished', () => (this.sent.length = 0));
    lease.on('keepaliveFired', () => this.sent.push(performance.now()));
    lease.on('keepaliveSucceeded', (res: ILeaseKeepAliveResponse) => this.renewed(res));
    lease.on('lost', (error: Error) => this.end(error));
    this.arm();
  }

  /**
   * Grants a lease of `ttlSeconds` (etcd may raise it to its minimum) and keeps it alive.
   * @throws the driver's error when etcd cannot grant it
   */
  static async open(
    client: Etcd3,
    ttlSeconds: number,
    drift: number,
    listener: SessionListener,
  ): Promise<EtcdSession> {
    const grantedAt = performance.now();
    const lease = client.lease(ttlSeconds);
    // A failed grant is also emitted as `lost`; with no listener that would be an unhandled error.
    lease.on('lost', () => undefined);
    const id = await lease.grant();
    return new EtcdSession(lease, id, grantedAt, ttlSeconds, drift, listener);
  }

  /**
   * A name for one more key of this session under `prefix`, unique in the cluster among the
   * keys that exist: a name whose key this session deleted is used again (see `reuse`).
   */
  name(prefix: string): string {
    const free = this.free.get(prefix);
    const name = free?.pop();
    if (name !== undefined) {
      if (free!.length === 0) this.free.delete(prefix);
      return name;
    }
    return `${prefix}${this.hex}.${(++this.count).toString(36)}`;
  }

  /**
   * The keys named `names` were deleted (a hold released, a waiter gone): their names may name
   * later keys of this session in the same lines. etcd keeps every deleted key in its index
   * until a compaction, and a range over a line visits them all: with a new name per hold, a
   * line's range, in every entry and query, slowed down with each hold it ever had (measured:
   * the uncontended cycle fell from 0.92 to 0.72 of a raw transaction + delete on one key
   * over 8,000 holds). Never a name of an abandoned entry (its cancel mark would refuse its
   * later entries). Bounded: once 1,024 lines keep free names, other lines get new names.
   */
  reuse(names: readonly string[]): void {
    if (this.ended) return;
    for (const name of names) {
      // The prefix is the line and part: everything up to the last '/' (none after it).
      const prefix = name.slice(0, name.lastIndexOf('/') + 1);
      let free = this.free.get(prefix);
      if (!free) {
        if (this.free.size >= MAX_FREE_LINES) continue;
        this.free.set(prefix, (free = []));
      }
      if (free.length < MAX_FREE_PER_LINE) free.push(name);
    }
  }

  /** Ends the session: etcd deletes every key bound to it. */
  async revoke(): Promise<void> {
    this.end(new Error('the session was closed'));
    await this.lease.revoke();
  }

  /** The session is over: no renewals any more, the listener is told once. */
  end(cause: Error): void {
    if (this.ended) return;
    this.ended = true;
    this.validUntil = -Infinity;
    clearTimeout(this.timer);
    this.lease.release();
    this.listener.sessionEnded(this, cause);
  }

  private renewed(res: ILeaseKeepAliveResponse): void {
    const sentAt = this.sent.shift();
    if (this.ended || sentAt === undefined) return;
    this.validUntil = Math.max(this.validUntil, sentAt + Number(res.TTL) * 1000 - this.drift);
    this.arm();
    this.listener.sessionRenewed(this);
  }

  /** Ends the session when its lease may have run out with no renewal (a stall, a partition). */
  private arm(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(
      () => {
        if (performance.now() < this.validUntil) return this.arm();
        this.end(new Error('the session lease ran out: no keep-alive answered in time'));
      },
      Math.max(1, Math.ceil(this.validUntil - performance.now())),
    );
    this.timer.unref();
  }
}
