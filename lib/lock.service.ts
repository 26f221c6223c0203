import { EventEmitter } from 'node:events';
import { type BeforeApplicationShutdown, Inject, Injectable, Logger } from '@nestjs/common';
import { isObservable, Observable } from 'rxjs';
import {
  LockConfigError,
  LockError,
  LockLostError,
  LockNotAcquiredError,
  SegmentExhaustedError,
} from './errors';
import type { LockContextInfo, LockedOptions, LockHandle } from './interfaces';
import { assertRawKey, type KeyRenderer } from './key-template';
import type { Lease, LockClient } from './lock-client';
import { Chain } from './chain';
import { LockClientRegistry } from './lock-client.registry';
import { holdId, holdsInScope, LockContext, type HoldRecord, type LockScope } from './lock-context';
import { type ResolvedRedlockOptions, validateBehaviour } from './redlock-options';
import { DEFAULT_CLIENT, RESOLVED_OPTIONS } from './redlock.constants';
import { SegmentedStrategy, sliceKey } from './strategies/segmented.strategy';
import { Watchdog } from './watchdog';

/** What a `lost` listener receives. */
export interface LockLostEvent {
  readonly keys: readonly string[];
  readonly client: string;
  readonly error: LockLostError;
}

/** Events of `LockService`. */
export interface LockServiceEvents {
  /** A held lock was lost while its call still ran (the signal aborted at the same moment). */
  lost: (event: LockLostEvent) => void;
}

/** Counters of a client group's waiting engine (see `LockService.stats`). */
export interface LockStats {
  /** Locks received by grant: a release in another process passed the key to a waiter here. */
  readonly grants: number;
  /** Waiters woken by a release notification (`PUBLISH ... r`). */
  readonly notifiedWakeups: number;
  /** Waiters that retried on their fallback timer (holder's lease ran out, or a lost message). */
  readonly timerWakeups: number;
  /** Locks handed straight to the next waiter of this process. */
  readonly localHandoffs: number;
  /** Acquire round trips sent. */
  readonly attempts: number;
  /** Release channels this process listens to right now. */
  readonly subscriptions: number;
  /** Keys with local holders or waiters right now. */
  readonly queues: number;
}

/** What `@Locked` stores about a method, prepared at decoration time. @internal */
export interface LockedMethod {
  readonly where: string;
  readonly render: KeyRenderer;
  readonly options: LockedOptions;
}

/** A lock held right now, for shutdown. */
interface ActiveHold {
  readonly lease: Lease;
  readonly client: LockClient;
  /** Created on first use of `signal` (most calls never look at it). */
  controller?: AbortController;
  /** Why the hold was lost, if it was before anyone asked for the signal. */
  lostReason?: LockLostError;
  watchdog?: Watchdog;
  readonly record: HoldRecord;
  /** Its links in the service's chain of holds in progress. */
  prev?: ActiveHold;
  next?: ActiveHold;
}

interface Behaviour {
  client: LockClient;
  clientName: string;
  ttl: number;
  watchdog: boolean;
  maxHold: number;
  waitTimeout: number;
  segments?: number;
}

const settle = async <T>(value: T | Promise<T>): Promise<T> => value;

/**
 * Distributed locks for code that is not a decorated method, and the engine behind `@Locked`.
 *
 * @example
 * ```ts
 * constructor(private readonly locks: LockService) {}
 *
 * async settle(orderId: string) {
 *   return this.locks.using(`order:${orderId}`, async ({ fence, signal }) => {
 *     await this.orders.settle(orderId, { fence });
 *   }, { waitTimeout: 0 });
 * }
 * ```
 * @publicApi
 */
@Injectable()
export class LockService implements BeforeApplicationShutdown {
  private readonly logger = new Logger('nest-locked');
  private readonly events = new EventEmitter();
  /** Holds in progress, for shutdown. */
  private readonly holds = new Chain<ActiveHold>();
  /** Resolved options of decorated methods, per options object. */
  private readonly behaviours = new WeakMap<LockedOptions, Behaviour>();
  private readonly segmented: SegmentedStrategy;
  private shuttingDown = false;

  constructor(
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedRedlockOptions,
    private readonly registry: LockClientRegistry,
  ) {
    this.segmented = new SegmentedStrategy();
  }

  /**
   * Runs `fn` while holding every key (all or nothing, taken in sorted order), renewing the
   * lease while it runs and releasing when it settles. Keys are used as given (no template).
   *
   * @throws LockNotAcquiredError still busy after `waitTimeout`
   * @throws LockBackendError Redis failed
   * @throws LockKeyError a key is empty or longer than 1024 bytes
   */
  async using<T>(
    keys: string | readonly string[],
    fn: (lock: LockContextInfo) => T | Promise<T>,
    options: LockedOptions = {},
  ): Promise<T> {
    validateBehaviour(options, 'LockService.using options');
    const list = (typeof keys === 'string' ? [keys] : [...keys]).map((k) =>
      assertRawKey(k, 'LockService.using'),
    );
    return this.run(list, options, () => fn(LockContext.current() as LockContextInfo));
  }

  /**
   * Takes the lock and returns a handle; release it yourself, in a `finally`. The watchdog
   * renews it until `release()` (unless `watchdog: false`). Not reentrant: a second `acquire` of
   * a key you hold waits like any other caller.
   */
  async acquire(
    keys: string | readonly string[],
    options: LockedOptions = {},
  ): Promise<LockHandle> {
    validateBehaviour(options, 'LockService.acquire options');
    if (options.segments !== undefined) {
      throw new LockConfigError(
        'LockService.acquire does not take "segments"; use using() or @Locked for segmented locks.',
        'segments',
      );
    }
    const list = (typeof keys === 'string' ? [keys] : [...keys]).map((k) =>
      assertRawKey(k, 'LockService.acquire'),
    );
    const b = this.resolveBehaviour(options);
    const hold = await this.take(sortUnique(list), b);
    const { lease, client } = hold;
    const release = () => this.finish(hold);
    const info = describe(hold);
    return {
      keys: info.keys,
      fence: info.fence,
      fences: info.fences,
      segment: info.segment,
      signal: info.signal,
      acquiredAt: info.acquiredAt,
      waitedMs: info.waitedMs,
      release,
      extend: async (ms: number) => {
        if (!(await client.extend(lease, ms))) {
          throw new LockLostError(lease.keys, 'lost');
        }
      },
    };
  }

  /** Whether `key` (a rendered key, without keyPrefix) is locked right now. */
  async isLocked(key: string, options: Pick<LockedOptions, 'client'> = {}): Promise<boolean> {
    return this.client(options.client).isLocked(assertRawKey(key, 'LockService.isLocked'));
  }

  /**
   * Forgets which slices of a segmented key were found exhausted, so a restocked resource is
   * used at once (without this, exhausted slices are retried within 1 s anyway).
   */
  resetSegments(key: string, options: Pick<LockedOptions, 'client'> = {}): void {
    this.segmented.reset(
      holdId(options.client ?? DEFAULT_CLIENT, assertRawKey(key, 'LockService.resetSegments')),
    );
  }

  /**
   * Counters of a client group's waiting engine, for metrics and tests: how waiters were woken
   * (`grants` and `notifiedWakeups` are pushes from a release, `timerWakeups` fallbacks), local
   * handoffs, acquire round trips, and the subscriptions and local queues alive right now.
   */
  stats(client: string = DEFAULT_CLIENT): LockStats {
    const c = this.client(client);
    return { ...c.stats, subscriptions: c.notifier.size, queues: c.queueCount };
  }

  /** Listens to lock events (`lost`). */
  on<E extends keyof LockServiceEvents>(event: E, listener: LockServiceEvents[E]): this {
    this.events.on(event, listener);
    return this;
  }

  /** Removes a listener added with `on`. */
  off<E extends keyof LockServiceEvents>(event: E, listener: LockServiceEvents[E]): this {
    this.events.off(event, listener);
    return this;
  }

  /** @internal Called by the `@Locked` proxy. */
  runDecorated(
    method: LockedMethod,
    fn: () => unknown,
    args: readonly unknown[],
  ): Promise<unknown> {
    let keys: string[];
    try {
      keys = method.render(args);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.run(keys, method.options, fn, true);
  }

  /** @internal */
  async beforeApplicationShutdown(): Promise<void> {
    this.shuttingDown = true;
    // Callers still waiting for a lock get a LockBackendError now instead of holding the
    // shutdown up until their waitTimeout.
    this.registry.abortWaits();
    await Promise.all(
      this.activeHolds().map((hold) => {
        abortHold(hold, new LockLostError(hold.lease.keys, 'shutdown'));
        return this.finish(hold);
      }),
    );
  }

  /** The group a call locks in. @throws LockConfigError for an unknown group */
  private client(name: string = DEFAULT_CLIENT): LockClient {
    return this.registry.get(name);
  }

  /** A decorated method passes the same options object at every call: resolved once. */
  private behaviour(options: LockedOptions): Behaviour {
    let b = this.behaviours.get(options);
    if (!b) {
      b = this.resolveBehaviour(options);
      this.behaviours.set(options, b);
    }
    return b;
  }

  private resolveBehaviour(options: LockedOptions): Behaviour {
    const o = this.options;
    const clientName = options.client ?? DEFAULT_CLIENT;
    return {
      client: this.client(clientName),
      clientName,
      ttl: options.ttl ?? o.ttl,
      watchdog: options.watchdog ?? o.watchdog,
      maxHold: options.maxHold ?? o.maxHold,
      waitTimeout: options.waitTimeout ?? o.waitTimeout,
      segments: options.segments,
    };
  }

  /** Lock, run, unlock: the one path behind `@Locked` and `using`. */
  private run(
    keys: string[],
    options: LockedOptions,
    fn: () => unknown,
    decorated = false,
  ): Promise<never> {
    const running = this.runLocked(keys, options, fn, decorated);
    if (options.onBusy !== 'skip') return running;
    return running.catch((err: unknown) => {
      if (err instanceof LockNotAcquiredError) return undefined as never;
      throw err;
    });
  }

  /** Not async itself (one promise less per call): a synchronous throw becomes a rejection. */
  private runLocked(
    keys: string[],
    options: LockedOptions,
    fn: () => unknown,
    decorated: boolean,
  ): Promise<never> {
    try {
      return this.routeLocked(keys, options, fn, decorated);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  private routeLocked(
    keys: string[],
    options: LockedOptions,
    fn: () => unknown,
    decorated: boolean,
  ): Promise<never> {
    const b = decorated ? this.behaviour(options) : this.resolveBehaviour(options);
    const sorted = sortUnique(keys);
    const scope = LockContext.scope();

    if (b.segments !== undefined) {
      const base = sorted[0];
      return this.segmented.run({
        id: holdId(b.clientName, base),
        base,
        segments: b.segments,
        waitTimeout: b.waitTimeout,
        tryRun: async (segment, waitMs, signal) => {
          const slice = [sliceKey(base, segment)];
          const hold = await this.takeSlice(slice, { ...b, waitTimeout: waitMs }, signal);
          if (typeof hold === 'number') return { busy: true, pttl: hold };
          return { busy: false, value: await this.runWith(hold, slice, b, fn, scope, segment) };
        },
        queued: (segment) => b.client.queued(sliceKey(base, segment)),
        heldHere: (segment) => b.client.holds(sliceKey(base, segment)),
        tryAny: b.client.canTakeAny
          ? async (order) => {
              const keys = order.map((segment) => sliceKey(base, segment));
              const r = await b.client.tryAcquireAny(keys, leaseTtl(b));
              if (typeof r === 'number') return { busy: true, pttl: r };
              const segment = order[r.index];
              const hold = this.start(r.lease, b);
              try {
                const value = await this.runWith(hold, [keys[r.index]], b, fn, scope, segment);
                return { busy: false, value };
              } catch (err) {
                if (err instanceof SegmentExhaustedError) {
                  return { busy: false, exhausted: err, segment };
                }
                throw err;
              }
            }
          : undefined,
      }) as Promise<never>;
    }
    // Reentrancy: every key already held by this async context -> no Redis round trip.
    if (scope && sorted.every((k) => holdsInScope(scope, b.clientName, k))) {
      return settle(fn()) as Promise<never>;
    }
    // Keys this context already holds are not taken twice.
    const needed = scope ? sorted.filter((k) => !holdsInScope(scope, b.clientName, k)) : sorted;
    return this.runWith(undefined, needed, b, fn, scope) as Promise<never>;
  }

  /** Runs `fn` under `given`, or under the keys `needed`, taken first. */
  private async runWith(
    given: ActiveHold | undefined,
    needed: readonly string[],
    b: Behaviour,
    fn: () => unknown,
    parent: LockScope | undefined,
    segment?: number,
  ): Promise<unknown> {
    const hold = given ?? this.start(await b.client.acquire(needed, leaseTtl(b), b.waitTimeout), b);
    const scope = new HoldScope(hold, b.clientName, needed, parent, segment);

    let result: unknown;
    try {
      result = LockContext.run(scope, fn);
    } catch (err) {
      await this.finish(hold);
      throw err;
    }
    if (isObservable(result)) return this.holdObservable(result, scope, hold);
    try {
      return await result;
    } finally {
      await this.finish(hold);
    }
  }

  /** An Observable keeps the lock until it completes, errors or is unsubscribed. */
  private holdObservable(
    source: Observable<unknown>,
    scope: LockScope,
    hold: ActiveHold,
  ): Observable<unknown> {
    return new Observable((subscriber) => {
      const inner = LockContext.run(scope, () =>
        source.subscribe({
          next: (v) => subscriber.next(v),
          error: (e: unknown) => void this.finish(hold).then(() => subscriber.error(e)),
          complete: () => void this.finish(hold).then(() => subscriber.complete()),
        }),
      );
      return () => {
        inner.unsubscribe();
        void this.finish(hold);
      };
    });
  }

  /** Acquires (waiting up to `waitTimeout`) and starts the watchdog. */
  private async take(keys: readonly string[], b: Behaviour): Promise<ActiveHold> {
    return this.start(await b.client.acquire(keys, leaseTtl(b), b.waitTimeout), b);
  }

  /**
   * For segment sweeps: contention comes back as the holder's lease left (no error object, as
   * sweeps meet many busy slices), and `signal` ends a wait early.
   */
  private async takeSlice(
    keys: string[],
    b: Behaviour,
    signal?: AbortSignal,
  ): Promise<ActiveHold | number> {
    const ttl = leaseTtl(b);
    const r =
      b.waitTimeout > 0
        ? // Waiting follows a sweep that found the slice busy: no first try, straight in line.
          await b.client.acquire(keys, ttl, b.waitTimeout, signal, true).catch((err: unknown) => {
            if (err instanceof LockNotAcquiredError) return err.retryAfterMs;
            throw err;
          })
        : await b.client.tryAcquire(keys, ttl);
    return typeof r === 'number' ? r : this.start(r, b);
  }

  private start(lease: Lease, b: Behaviour): ActiveHold {
    const hold: ActiveHold = { lease, client: b.client, record: { active: true } };
    if (b.watchdog) {
      hold.watchdog = new Watchdog(b.client, lease, lease.ttl, b.maxHold, (error) =>
        this.lost(hold, b.clientName, error),
      );
      hold.watchdog.start();
    }
    this.holds.push(hold);
    if (this.shuttingDown) {
      abortHold(hold, new LockLostError(lease.keys, 'shutdown'));
    }
    return hold;
  }

  private activeHolds(): ActiveHold[] {
    const holds: ActiveHold[] = [];
    for (let h = this.holds.first; h; h = h.next) holds.push(h);
    return holds;
  }

  private lost(hold: ActiveHold, client: string, error: LockLostError): void {
    abortHold(hold, error);
    this.logger.warn(error.message);
    this.events.emit('lost', { keys: hold.lease.keys, client, error } satisfies LockLostEvent);
  }

  /** Stops renewals and releases; a failed release is logged, never thrown over the result. */
  private async finish(hold: ActiveHold): Promise<void> {
    if (!hold.record.active) return;
    this.holds.remove(hold);
    hold.watchdog?.stop();
    hold.record.active = false;
    try {
      await hold.client.release(hold.lease);
    } catch (err) {
      const why = err instanceof LockError || err instanceof Error ? err.message : String(err);
      this.logger.warn(`Release failed, the lease will expire by itself: ${why}`);
    }
  }
}

/**
 * The scope of a locked call, for `LockContext`. A class, not an object literal with a getter:
 * a literal whose getter is a fresh closure gets a hidden class of its own at every call, which
 * made young-generation GCs several times slower.
 */
class HoldScope implements LockScope {
  #info?: LockContextInfo;
  readonly record: HoldRecord;

  constructor(
    private readonly hold: ActiveHold,
    readonly client: string,
    readonly keys: readonly string[],
    readonly parent: LockScope | undefined,
    private readonly segment: number | undefined,
  ) {
    this.record = hold.record;
  }

  /** Built when someone asks for it (most methods never do). */
  get info(): LockContextInfo {
    return (this.#info ??= describe(this.hold, this.segment));
  }
}

/** What `LockContext.current()` and an acquire handle tell about a hold. */
class HoldInfo implements LockContextInfo {
  readonly #hold: ActiveHold;
  readonly keys: readonly string[];
  readonly fence: number;
  readonly fences: Readonly<Record<string, number>>;
  readonly segment?: number;
  readonly acquiredAt: number;
  readonly waitedMs: number;

  constructor(hold: ActiveHold, segment?: number) {
    const { lease } = hold;
    const fences: Record<string, number> = {};
    lease.keys.forEach((k, i) => (fences[k] = lease.fences[i]));
    this.#hold = hold;
    this.keys = lease.keys;
    this.fence = lease.fences[0];
    this.fences = fences;
    this.segment = segment;
    this.acquiredAt = lease.acquiredAt;
    this.waitedMs = lease.waitedMs;
  }

  /** Created on first use. */
  get signal(): AbortSignal {
    return signalOf(this.#hold);
  }
}

function describe(hold: ActiveHold, segment?: number): LockContextInfo {
  return new HoldInfo(hold, segment);
}

/** The hold's signal, created on first use (already aborted if the hold was lost before). */
function signalOf(hold: ActiveHold): AbortSignal {
  if (!hold.controller) {
    hold.controller = new AbortController();
    if (hold.lostReason) hold.controller.abort(hold.lostReason);
  }
  return hold.controller.signal;
}

function abortHold(hold: ActiveHold, reason: LockLostError): void {
  if (hold.controller) {
    if (!hold.controller.signal.aborted) hold.controller.abort(reason);
  } else {
    hold.lostReason ??= reason;
  }
}

/** The lease asked for: never longer than maxHold. */
const leaseTtl = (b: Behaviour): number => Math.max(10, Math.ceil(Math.min(b.ttl, b.maxHold)));

function sortUnique(keys: readonly string[]): readonly string[] {
  if (keys.length === 1) return keys;
  return [...new Set(keys)].sort();
}
