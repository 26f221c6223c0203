import { performance } from 'node:perf_hooks';
import { LockBackendError, LockNotAcquiredError } from '../errors';
import type { DeadlineListener } from '../core/deadline-timer';
import type { EtcdSession } from './etcd-session';

/**
 * One acquire call waiting in the lines of its keys. Whatever ends it (its deadline, its
 * signal, the session lost, the backend closing) cancels it once, with a reason; every watch
 * and pause of the call listens for that through `onCancel`.
 * @internal
 */
export class EtcdWait implements DeadlineListener {
  /** Why it ended, once it did. */
  reason?: unknown;
  private readonly cancels = new Set<(reason: unknown) => void>();

  constructor(
    readonly keys: readonly string[],
    readonly session: EtcdSession,
    private readonly startedAt: number,
    /** `performance.now()` at which the caller stops waiting. */
    readonly deadline: number,
    /** The caller's lease length: the Retry-After estimate of a busy answer. */
    private readonly ttl: number,
    /**
     * One round trip to etcd, bounded: resolves when etcd answers, rejects with why not. At the
     * deadline it decides between busy and an outage (a watch waits through an outage without
     * a word: etcd3 reconnects it on its own).
     */
    private readonly lastWord: () => Promise<void>,
  ) {}

  get cancelled(): boolean {
    return this.reason !== undefined;
  }

  /** The deadline passed: busy if etcd answers now, else a LockBackendError with its cause. */
  onDeadline(): void {
    if (this.cancelled) return;
    this.lastWord().then(
      () => {
        const waited = performance.now() - this.startedAt;
        this.cancel(new LockNotAcquiredError(this.keys, waited, this.ttl));
      },
      (error: unknown) => {
        const cause = error instanceof Error ? error : new Error(String(error));
        this.cancel(new LockBackendError(this.keys, [cause], 'acquire', 'etcd'));
      },
    );
  }

  cancel(reason: unknown): void {
    if (this.cancelled) return;
    this.reason = reason;
    for (const cancel of this.cancels) cancel(reason);
    this.cancels.clear();
  }

  /** Calls `cancel` when the wait ends (at once if it has); the returned function unhooks it. */
  onCancel(cancel: (reason: unknown) => void): () => void {
    if (this.cancelled) {
      cancel(this.reason);
      return () => undefined;
    }
    this.cancels.add(cancel);
    return () => this.cancels.delete(cancel);
  }

  /** Waits `ms` (between retries after an error of etcd); rejects if the wait ends meanwhile. */
  pause(ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        off();
        resolve();
      }, ms);
      const off = this.onCancel((reason) => {
        clearTimeout(timer);
        reject(reason);
      });
    });
  }
}
