import { performance } from 'node:perf_hooks';
import { LockBackendError, LockNotAcquiredError } from '../errors';
import type { DeadlineListener } from '../core/deadline-timer';
import type { AbortableWait } from '../core/session-backend';
import type { EtcdSession } from './etcd-session';

/**
 * One acquire call waiting in the lines of its keys. Whatever ends it (its deadline, its
 * signal, the session lost, the backend closing) aborts it once, with a reason; every watch
 * and pause of the call listens for that through `onAbort`.
 * @internal
 */
export class EtcdWait implements DeadlineListener, AbortableWait {
  /** Why it ended, once it did. */
  reason?: unknown;
  private readonly listeners = new Set<(reason: unknown) => void>();

  constructor(
    readonly keys: readonly string[],
    readonly session: EtcdSession,
    private readonly startedAt: number,
    /** `performance.now()` at which the caller stops waiting. */
    readonly deadline: number,
    /**
     * One round trip to etcd, bounded: resolves when etcd answers, rejects with why not. At the
     * deadline it decides between busy and an outage (a watch waits through an outage without
     * a word: etcd3 reconnects it on its own).
     */
    private readonly lastWord: () => Promise<void>,
    /** The Retry-After of a busy answer: the holder's lease left, or an estimate (never fails). */
    private readonly busyFor: () => Promise<number>,
  ) {}

  get aborted(): boolean {
    return this.reason !== undefined;
  }

  /** The deadline passed: busy if etcd answers now, else a LockBackendError with its cause. */
  onDeadline(): void {
    if (this.aborted) return;
    this.lastWord().then(
      () => {
        const waited = performance.now() - this.startedAt;
        void this.busyFor().then((left) =>
          this.abort(new LockNotAcquiredError(this.keys, waited, left)),
        );
      },
      (error: unknown) => {
        const cause = error instanceof Error ? error : new Error(String(error));
        this.abort(new LockBackendError(this.keys, [cause], 'acquire', 'etcd'));
      },
    );
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.reason = reason;
    for (const listener of this.listeners) listener(reason);
    this.listeners.clear();
  }

  /** Calls `listener` when the wait ends (at once if it has); the returned function unhooks it. */
  onAbort(listener: (reason: unknown) => void): () => void {
    if (this.aborted) {
      listener(this.reason);
      return () => undefined;
    }
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Waits `ms` (between retries after an error of etcd); rejects if the wait ends meanwhile. */
  pause(ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        off();
        resolve();
      }, ms);
      const off = this.onAbort((reason) => {
        clearTimeout(timer);
        reject(reason);
      });
    });
  }
}
