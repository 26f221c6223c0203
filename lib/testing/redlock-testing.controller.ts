import { Injectable } from '@nestjs/common';
import { LockService } from '../api/lock.service';
import { LockConfigError } from '../errors';
import { assertRawKey } from '../keys';
import type { LockBackendFactory } from '../module/lock-group.registry';
import { InMemoryBackend } from '../memory/in-memory-backend';
import { UNKNOWN_CLIENT } from '../module/module.messages';
import { BAD_OPTION } from '../options/option.messages';
import {
  TESTING_BACKEND_DOWN,
  TESTING_EXPECTED,
  TESTING_NOTHING_TO_LOSE,
} from './testing.messages';

/** Which client group a control acts on. */
export interface TestingControlTarget {
  /** A client group's name. @default every group */
  client?: string;
}

/** Options of `RedlockTestingController.busy()`. */
export interface BusyControlOptions extends TestingControlTarget {
  /**
   * How many acquisitions of the key to turn away: an integer >= 1, or `Infinity` for every
   * one until `reset()`.
   * @default 1
   */
  times?: number;
  /**
   * The `retryAfterMs` the `LockNotAcquiredError` carries (`Retry-After`), exactly. Without it,
   * the busy answer a real backend gives a key this process has no hold history of: the
   * holder's lease left (the ttl), at most 1 s, or the key's usual hold here.
   * @default estimated, as on a real backend
   */
  retryAfterMs?: number;
}

/** Options of `RedlockTestingController.down()`. */
export interface DownControlOptions extends TestingControlTarget {
  /** The `cause` of the `LockBackendError` every call gets. @default an Error saying so */
  cause?: Error;
}

/** The in-memory backends of one testing module, by group. @internal */
@Injectable()
export class InMemoryBackends {
  private readonly groups = new Map<string, InMemoryBackend>();

  /** Builds a group's backend (the registry calls it once per group). */
  readonly factory: LockBackendFactory = (name, options) => {
    const backend = new InMemoryBackend(name, options.driftFactor);
    this.groups.set(name, backend);
    return backend;
  };

  /** One group, or every group. @throws LockConfigError for an unknown group */
  pick(client: string | undefined): InMemoryBackend[] {
    if (client === undefined) return [...this.groups.values()];
    const backend = this.groups.get(client);
    if (!backend) {
      throw new LockConfigError(UNKNOWN_CLIENT(client, [...this.groups.keys()]), 'client');
    }
    return [backend];
  }
}

/**
 * Faults for unit tests under `RedlockTestingModule`: a busy key, a backend that is down, a
 * held lock that is lost. They go through the real `LockService`, decorator and interceptor, so
 * a test sees what production code would: `LockNotAcquiredError` (409 over HTTP, or nothing
 * with `onBusy: 'skip'`), `LockBackendError` (503), a `LockLostError` on the holder's signal and
 * the `lost` event. Controls apply to every group unless `client` names one; `reset()` clears
 * them all (call it in `afterEach` when the module is shared between tests).
 *
 * @example
 * ```ts
 * const locks = moduleRef.get(RedlockTestingController);
 *
 * locks.busy('product:1');                 // the next call on product:1 is turned away
 * await expect(shop.purchase(1, 1)).rejects.toBeInstanceOf(LockNotAcquiredError);
 *
 * locks.down();                            // every call: LockBackendError, until restore()
 * await expect(shop.purchase(1, 1)).rejects.toBeInstanceOf(LockBackendError);
 * locks.restore();
 * ```
 * @publicApi
 */
@Injectable()
export class RedlockTestingController {
  constructor(
    private readonly backends: InMemoryBackends,
    private readonly locks: LockService,
  ) {}

  /**
   * The next acquisition of `key` (or the next `times`) finds it busy: the call fails at once
   * with `LockNotAcquiredError`, without waiting, as if another instance held the key for the
   * whole `waitTimeout`. A segmented key covers all its slices (one call is one use). Calls
   * that already hold the key (reentrant ones) are not affected.
   */
  busy(key: string, options: BusyControlOptions = {}): this {
    const k = assertRawKey(key, 'RedlockTestingController.busy');
    const { times = 1, retryAfterMs, client } = options;
    if (!(times === Infinity || (Number.isInteger(times) && times >= 1))) {
      throw new LockConfigError(BAD_OPTION('times', times, TESTING_EXPECTED.times), 'times');
    }
    if (retryAfterMs !== undefined && !(Number.isFinite(retryAfterMs) && retryAfterMs >= 0)) {
      const message = BAD_OPTION('retryAfterMs', retryAfterMs, TESTING_EXPECTED.retryAfterMs);
      throw new LockConfigError(message, 'retryAfterMs');
    }
    for (const backend of this.backends.pick(client)) backend.busy(k, times, retryAfterMs);
    return this;
  }

  /**
   * The backend is unreachable until `restore()`: every acquire, release, renewal and
   * `isLocked` fails with `LockBackendError`. Callers already waiting keep waiting (and fail with
   * `LockBackendError` at their deadline if it is still down); a release that fails leaves the
   * lock to expire with its lease, and renewals that fail end in a `lost` (`expired`) report,
   * as with a real outage.
   */
  down(options: DownControlOptions = {}): this {
    const { cause = new Error(TESTING_BACKEND_DOWN), client } = options;
    if (!(cause instanceof Error)) {
      throw new LockConfigError(BAD_OPTION('cause', cause, TESTING_EXPECTED.cause), 'cause');
    }
    for (const backend of this.backends.pick(client)) backend.down(cause);
    return this;
  }

  /** Ends `down()`: waiters are served again, new calls work. */
  restore(options: TestingControlTarget = {}): this {
    for (const backend of this.backends.pick(options.client)) backend.restore();
    return this;
  }

  /**
   * Takes the held lock of `key` away from the call that holds it, as an expiry or a stolen key
   * would: its signal (`LockContext.current().signal`, a handle's `signal`) aborts at once with
   * a `LockLostError` (reason `'lost'`), `LockService` emits `lost`, and the key goes to the next
   * caller, with a larger fence. The holder's method goes on (its result stands), as in
   * production.
   * @throws Error when nobody holds `key`
   */
  lose(key: string, options: TestingControlTarget = {}): void {
    const k = assertRawKey(key, 'RedlockTestingController.lose');
    let lost = false;
    for (const backend of this.backends.pick(options.client)) {
      const lease = backend.lose(k);
      if (!lease) continue;
      this.locks.leaseLost(lease);
      lost = true;
    }
    if (!lost) throw new Error(TESTING_NOTHING_TO_LOSE(k));
  }

  /** Clears every control (busy keys, down); held locks, waiters and fences are left alone. */
  reset(): void {
    for (const backend of this.backends.pick(undefined)) backend.reset();
  }
}
