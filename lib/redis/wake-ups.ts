import { type KeySpace, RELEASED_MESSAGE } from './protocol/key-space';
import type { LockNotifier } from './protocol/lock-notifier';
import type { LineListener } from './key-line';
import type { LockCounts } from '../core/lock-backend';
import type { ReleaseWatch } from './multi-key-wait';

/**
 * How the waits of one engine hear that a key may be theirs: a release on a key's channel (racing
 * waiters, woken to try), or the group's grant channel (queued waiters, granted by the release).
 * A subscription is waited for briefly (`commandTimeout` at most) and never fails: without it a
 * waiter still retries on its timer.
 * @internal
 */
export class WakeUps {
  constructor(
    private readonly notifier: Pick<LockNotifier, 'listen' | 'listening' | 'ready'>,
    private readonly space: Pick<KeySpace, 'releaseChannel'>,
    private readonly stats: LockCounts,
    private readonly commandTimeout: number,
  ) {}

  /** Listens for releases of any of `keys` (one shared subscriber connection). */
  watch(keys: readonly string[], onRelease: () => void): ReleaseWatch {
    const subs = keys.map((k) => this.onReleases(k, onRelease));
    return {
      ready: this.soon(Promise.all(subs.map((s) => s.ready)).then(() => undefined)),
      stop: () => {
        for (const s of subs) s.stop();
      },
    };
  }

  /** Calls `onRelease` at each release of `key` (racing waiters; counted as a push wake-up). */
  onReleases(key: string, onRelease: () => void): LineListener {
    return this.notifier.listen(this.space.releaseChannel(key), (message) => {
      if (message !== RELEASED_MESSAGE) return;
      this.stats.notifiedWakeups++;
      onRelease();
    });
  }

  /** Waits (see `soon`) for the group's grant channel, unless it is subscribed already. */
  subscribed(): Promise<void> {
    return this.notifier.listening ? RESOLVED : this.soon(this.notifier.ready());
  }

  /** Waits for a subscription, never long (`commandTimeout` at most) and never failing. */
  async soon(ready: Promise<void>): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      ready.catch(() => undefined),
      new Promise((resolve) => (timer = setTimeout(resolve, this.commandTimeout))),
    ]);
    clearTimeout(timer);
  }
}

/** What `subscribed` answers once subscribed: no promise made per wait. */
export const RESOLVED: Promise<void> = Promise.resolve();
