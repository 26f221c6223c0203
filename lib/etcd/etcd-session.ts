import { performance } from 'node:perf_hooks';
import type { Etcd3, ILeaseKeepAliveResponse, Lease as EtcdLease } from 'etcd3';

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

  /** A name for one more key of this session under `prefix`, unique in the cluster. */
  name(prefix: string): string {
    return `${prefix}${this.hex}.${(++this.count).toString(36)}`;
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
