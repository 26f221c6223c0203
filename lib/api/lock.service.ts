import {
  type BeforeApplicationShutdown,
  Inject,
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleInit,
  Optional,
} from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { isObservable } from 'rxjs';
import { LockConfigError, LockNotAcquiredError, SegmentExhaustedError } from '../errors';
import type { LockCallOptions, LockContextInfo, LockedOptions, LockHandle } from '../interfaces';
import { assertRawKey, type KeyRenderer, rawKeys } from '../keys';
import type { Lease, LockBackend } from '../core/lock-backend';
import type { ActiveHold } from './active-hold';
import { ActiveHolds } from './active-holds';
import { HoldHandle } from './hold-handle';
import { HoldScope } from './hold-scope';
import { heldObservable } from './held-observable';
import { acquireRequest, type Behaviour, leaseTtl, resolveBehaviour } from './call-behaviour';
import { type HoldRecord, holdId, LockContext, type LockScope } from './lock-context';
import { checkReentry, leaveAll, reenter } from './reentry';
import { type ResolvedRedlockOptions, validateBehaviour } from '../options/redlock-options';
import { DEFAULT_CLIENT, RESOLVED_OPTIONS } from '../redlock.constants';
import {
  ACQUIRE_TAKES_NO_SEGMENTS,
  LOCK_EVENT_LISTENER_FAILED,
  USING_NEEDS_FUNCTION,
} from './api.messages';
import { SegmentedStrategy, sliceKey } from './segmented.strategy';
import { refuseUnsupportedShare } from './shared-hold-support';
import {
  findNestEventBus,
  type LockEventName,
  LockEvents,
  type LockServiceEvents,
} from './lock-events';
import { LockGroups } from './lock-groups';
import { LockOrderCalls } from './lock-order-calls';
import type { HeldChain } from '../lock-order/held-chain';
import type { FoundCycle } from '../lock-order/lock-order-checker';
import type { LockOrderGraphView } from '../lock-order/order-graph-view';
import { LockTelemetry } from './lock-telemetry';

/** Counters of a client group's waiting engine (see `LockService.stats`). */
export interface LockStats {
  /**
   * Waits that ended with the key passed on by the server's line: the holder before let go and
   * the key went to a waiter here (Redis: a grant; etcd, ZooKeeper: the entry ahead went).
   */
  readonly grants: number;
  /** Waiters woken by the server telling of a release (Redis: `PUBLISH`; etcd: a watch). */
  readonly notifiedWakeups: number;
  /** Waiters that retried on their fallback timer (holder's lease ran out, or a lost message). */
  readonly timerWakeups: number;
  /** Locks handed straight to the next waiter of this process. */
  readonly localHandoffs: number;
  /** Acquire round trips sent. */
  readonly attempts: number;
  /**
   * Release channels this process listens to right now (Redis); 0 on a backend that does not
   * subscribe per key (PostgreSQL, MySQL, etcd, ZooKeeper, memory).
   */
  readonly subscriptions: number;
  /** Keys with local holders or waiters right now. */
  readonly queues: number;
}

/** What `@Locked` stores about a method, prepared at decoration time. @internal */
export interface LockedMethod {
  readonly where: string;
  readonly render: KeyRenderer;
  readonly options: LockedOptions;
  /** The lock classes of its templates (undefined for a key function): see `lock-order/`. */
  readonly classes?: readonly string[];
}

/** A locked call in progress: what `runHeld` runs, and the promise it settles. */
interface HeldCall {
  readonly needed: readonly string[];
  readonly b: Behaviour;
  readonly fn: () => unknown;
  readonly parent: LockScope | undefined;
  readonly segment: number | undefined;
  /** Holds of the enclosing calls that this nested call re-entered: left when it ends. */
  readonly entered: readonly HoldRecord[];
  /** The lock classes its context holds once it has its keys (lock-order checking on). */
  readonly chain: HeldChain | undefined;
  readonly resolve: (value: unknown) => void;
  readonly reject: (reason: unknown) => void;
}

/** No hold re-entered (a call outside any locked call, or a segmented one). */
const NONE: readonly HoldRecord[] = [];

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
export class LockService
  implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown
{
  private readonly logger = new Logger('nest-locked');
  /** Who observes lock events; every emission point reads its flag first. */
  private readonly events = new LockEvents((event, err) =>
    this.logger.warn(LOCK_EVENT_LISTENER_FAILED(event, err)),
  );
  /** Set only when locked calls get spans. */
  private tracing?: LockTelemetry;
  /** Holds in progress: started, lost, finished. */
  private readonly holds = new ActiveHolds(this.events, this.logger);
  /** Resolved options of decorated methods, per options object. */
  private readonly behaviours = new WeakMap<LockedOptions, Behaviour>();
  private readonly segmented: SegmentedStrategy;
  /** Lock-order checking (`lockOrder`) and long-wait reports (`holderReportAfter`). */
  private readonly order: LockOrderCalls;

  constructor(
    @Inject(RESOLVED_OPTIONS) private readonly options: ResolvedRedlockOptions,
    private readonly registry: LockGroups,
    @Optional() private readonly moduleRef?: ModuleRef,
  ) {
    this.segmented = new SegmentedStrategy();
    this.order = new LockOrderCalls(options, this.logger, this.events, this.holds);
  }

  /**
   * @internal Starts the long-wait reports and reads the lock-order edges other instances stored
   * in the groups' backends (bounded: a store that does not answer is read again in the
   * background).
   */
  async onApplicationBootstrap(): Promise<void> {
    await this.order.start(this.registry.names.map((name) => this.registry.get(name)));
  }

  /**
   * The lock-order cycles this service found (for `expectNoLockOrderCycles` of
   * `nest-locked/testing`), oldest first. @internal
   */
  lockOrderCycles(): readonly FoundCycle[] {
    return this.order.cycles;
  }

  /** The lock-order graph this instance knows, for the lock board; none when `'off'`. @internal */
  lockOrderGraph(): LockOrderGraphView | undefined {
    return this.order.graph();
  }

  /**
   * The holds of this process right now, oldest first (the lock board reads them on demand;
   * nothing is recorded for it on the lock path).
   * @internal
   */
  heldNow(): IterableIterator<ActiveHold> {
    return this.holds[Symbol.iterator]();
  }

  /**
   * @internal Finds the observers that are there at startup (the Nest event bus, telemetry) and
   * hears when a Redis connection is ready again.
   */
  onModuleInit(): void {
    const telemetry = LockTelemetry.start(this.options.telemetry);
    this.tracing = telemetry?.tracing ? telemetry : undefined;
    this.events.connect(this.moduleRef && findNestEventBus(this.moduleRef), telemetry);
    // Holds exist only once the application runs: told from then on.
    // A Redis connection of the group is ready (again): every hold of it renews now, so one whose
    // lock went with the server's data learns it within a round trip (renewals go out batched,
    // see RenewalBatcher).
    this.registry.whenReady((group) => this.holds.renewGroup(group));
  }

  /**
   * Runs `fn` while holding every key (all or nothing, taken in sorted order), renewing the
   * lease while it runs and releasing when it settles. Keys are used as given (no template).
   *
   * @throws LockNotAcquiredError still busy after `waitTimeout`
   * @throws LockBackendError Redis failed
   * @throws LockKeyError `keys` is not a key or a non-empty array of keys, or a key is empty,
   *   longer than 1024 bytes or holds a lone surrogate
   * @throws LockConfigError `fn` is not a function
   */
  async using<T>(
    keys: string | readonly string[],
    fn: (lock: LockContextInfo) => T | Promise<T>,
    options: LockCallOptions = {},
  ): Promise<T> {
    validateBehaviour(options, 'LockService.using options');
    const list = rawKeys(keys, 'LockService.using');
    if (typeof fn !== 'function') {
      throw new LockConfigError(USING_NEEDS_FUNCTION('LockService.using', fn), 'fn');
    }
    const body = () => fn(LockContext.current() as LockContextInfo);
    if (this.tracing) {
      const client = options.client ?? DEFAULT_CLIENT;
      return this.tracing.traced('LockService.using', client, list, () =>
        this.run(list, options, body, undefined, options.signal),
      );
    }
    return this.run(list, options, body, undefined, options.signal);
  }

  /**
   * Takes the lock and returns a handle; release it yourself, in a `finally`. The watchdog
   * renews it until `release()` (unless `watchdog: false`). Not reentrant: a second `acquire` of
   * a key you hold waits like any other caller.
   */
  acquire(keys: string | readonly string[], options: LockCallOptions = {}): Promise<LockHandle> {
    // Not async: a caller waiting in line keeps one promise of ours alive, not two suspended
    // async functions (each a generator, a context and two closures).
    let list: string[];
    let b: Behaviour;
    try {
      validateBehaviour(options, 'LockService.acquire options');
      if (options.segments !== undefined) {
        throw new LockConfigError(ACQUIRE_TAKES_NO_SEGMENTS, 'segments');
      }
      list = rawKeys(keys, 'LockService.acquire');
      b = this.resolveBehaviour(options, 'LockService.acquire');
    } catch (err) {
      return Promise.reject(err);
    }
    let acquired: Promise<Lease>;
    const sorted = sortUnique(list);
    try {
      // A handle's hold is not in the async context (nothing nests in it), but it may be asked
      // for inside a locked call: that nesting is an edge like any other.
      if (this.order.checker)
        this.order.chain(LockContext.scope(), b, options, undefined, list, sorted, sorted);
    } catch (err) {
      return Promise.reject(err);
    }
    try {
      acquired = b.client.acquire(sorted, acquireRequest(b, options.signal));
    } catch (err) {
      return Promise.reject(this.refused(err, b));
    }
    return acquired.then(
      (lease) => new HoldHandle(this.holds.start(lease, b)),
      (err: unknown) => {
        throw this.refused(err, b);
      },
    );
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
    return { ...c.stats, subscriptions: c.subscriptions ?? 0, queues: c.queueCount };
  }

  /**
   * Listens to lock events: `acquired`, `released`, `busy`, `lost`, `error` (payloads in
   * {@link LockServiceEvents}). A listener runs synchronously inside the lock call: keep it
   * short; one that throws is logged and the call goes on. Events nobody listens to cost nothing.
   *
   * @example
   * ```ts
   * locks.on('busy', ({ keys, waitedMs }) => this.logger.warn(`${keys} busy after ${waitedMs} ms`));
   * ```
   */
  on<E extends LockEventName>(event: E, listener: LockServiceEvents[E]): this {
    this.events.on(event, listener);
    return this;
  }

  /** Removes a listener added with `on`. */
  off<E extends LockEventName>(event: E, listener: LockServiceEvents[E]): this {
    this.events.off(event, listener);
    return this;
  }

  /** @internal Called by the `@Locked` proxy. */
  runDecorated(
    method: LockedMethod,
    fn: () => unknown,
    args: readonly unknown[],
    self?: unknown,
  ): Promise<unknown> {
    let keys: string[];
    try {
      keys = method.render(args, self);
    } catch (err) {
      return Promise.reject(err);
    }
    if (this.tracing) {
      const client = method.options.client ?? DEFAULT_CLIENT;
      return this.tracing.traced(method.where, client, keys, () =>
        this.run(keys, method.options, fn, method),
      );
    }
    return this.run(keys, method.options, fn, method);
  }

  /** @internal */
  async beforeApplicationShutdown(): Promise<void> {
    // Edges still being stored are given a moment: the next instance to start reads them.
    const edgesStored = this.order.stop();
    this.holds.shutdown();
    // Callers still waiting for a lock get a LockBackendError now instead of holding the
    // shutdown up until their waitTimeout.
    this.registry.abortWaits();
    await this.holds.endAll();
    await edgesStored;
  }

  /**
   * @internal The lock of `lease` is gone (the `lose` control of `nest-locked/testing`): its
   * hold learns it now, as its watchdog would at the next renewal. Whether a hold had it.
   */
  leaseLost(lease: Lease): boolean {
    return this.holds.leaseLost(lease);
  }

  /** The group a call locks in. @throws LockConfigError for an unknown group */
  private client(name: string = DEFAULT_CLIENT): LockBackend {
    return this.registry.get(name);
  }

  /** A decorated method passes the same options object at every call: resolved once. */
  private behaviour(method: LockedMethod): Behaviour {
    const { options } = method;
    let b = this.behaviours.get(options);
    if (!b) {
      b = this.resolveBehaviour(options, '@Locked');
      b.site = method.where;
      this.behaviours.set(options, b);
    }
    return b;
  }

  /**
   * A call's options over the module's, for its group. `who` names the call in the
   * LockConfigError of a shared hold its backend has not.
   */
  private resolveBehaviour(options: LockedOptions, who = 'LockService.using'): Behaviour {
    const clientName = options.client ?? DEFAULT_CLIENT;
    const client = this.client(clientName);
    refuseUnsupportedShare(who, clientName, this.registry.definition(clientName), options);
    return resolveBehaviour(options, this.options, clientName, client);
  }

  /**
   * Lock, run, unlock: the one path behind `@Locked` and `using`. Not async itself (one promise
   * less per call): a synchronous throw becomes a rejection.
   */
  private run(
    keys: string[],
    options: LockedOptions,
    fn: () => unknown,
    method?: LockedMethod,
    signal?: AbortSignal,
  ): Promise<never> {
    let running: Promise<never>;
    try {
      running = this.routeLocked(keys, options, fn, method, signal);
    } catch (err) {
      running = Promise.reject(err);
    }
    if (options.onBusy !== 'skip') return running;
    return running.catch((err: unknown) => {
      if (err instanceof LockNotAcquiredError) return undefined as never;
      throw err;
    });
  }

  private routeLocked(
    keys: string[],
    options: LockedOptions,
    fn: () => unknown,
    method: LockedMethod | undefined,
    signal: AbortSignal | undefined,
  ): Promise<never> {
    const b = method ? this.behaviour(method) : this.resolveBehaviour(options);
    const sorted = sortUnique(keys);
    const scope = LockContext.scope();

    if (b.segments !== undefined) {
      const base = sorted[0];
      const chain =
        this.order.checker && this.order.chain(scope, b, options, method, keys, sorted, sorted);
      const runSlice = (hold: ActiveHold, taken: string[], segment: number) =>
        this.runWith(hold, taken, b, fn, scope, segment, undefined, NONE, chain);
      const running = this.segmented.run({
        id: holdId(b.clientName, base),
        base,
        segments: b.segments,
        waitTimeout: b.waitTimeout,
        signal,
        tryRun: async (segment, waitMs, signal) => {
          const slice = [sliceKey(base, segment)];
          const hold = await this.takeSlice(slice, { ...b, waitTimeout: waitMs }, signal);
          if (typeof hold === 'number') return { busy: true, pttl: hold };
          return { busy: false, value: await runSlice(hold, slice, segment) };
        },
        queued: (segment) => b.client.queued(sliceKey(base, segment)),
        heldHere: (segment) => b.client.holds(sliceKey(base, segment)),
        tryAny: b.client.canTakeAny
          ? async (order) => {
              const keys = order.map((segment) => sliceKey(base, segment));
              const r = await b.client.tryAcquireAny(keys, leaseTtl(b), b.acks);
              if (typeof r === 'number') return { busy: true, pttl: r };
              const segment = order[r.index];
              const hold = this.holds.start(r.lease, b);
              try {
                const value = await runSlice(hold, [keys[r.index]], segment);
                return { busy: false, value };
              } catch (err) {
                if (err instanceof SegmentExhaustedError) {
                  return { busy: false, exhausted: err, segment };
                }
                throw err;
              }
            }
          : undefined,
      });
      return running.catch((err: unknown) => {
        throw this.refused(err, b);
      }) as Promise<never>;
    }
    if (!scope) {
      const chain =
        this.order.checker && this.order.chain(scope, b, options, method, keys, sorted, sorted);
      const running = this.runWith(undefined, sorted, b, fn, scope, undefined, signal, NONE, chain);
      return running as Promise<never>;
    }
    checkReentry(scope, sorted, b);
    // Keys this context already holds are not taken twice: the call enters their holds, which
    // are then released only once it has ended too (awaited or not). Every key held: it runs at
    // once, without a round trip.
    const { entered, needed } = reenter(scope, b.clientName, sorted);
    let chain: HeldChain | undefined;
    if (this.order.checker && needed.length > 0) {
      try {
        chain = this.order.chain(scope, b, options, method, keys, sorted, needed);
      } catch (err) {
        // Refused by the order check before any wait: it leaves the holds it entered.
        return new Promise<never>((_, reject) => leaveAll(entered, () => reject(err)));
      }
    }
    const running = this.runWith(
      undefined,
      needed,
      b,
      fn,
      scope,
      undefined,
      signal,
      entered,
      chain,
    );
    return running as Promise<never>;
  }

  /**
   * Runs `fn` under `given`, or under the keys `needed`, taken first (none: it runs in the holds
   * it `entered`). Not async: one promise carries the call from the acquire to the release's
   * answer (every async step would make a promise of its own, and with the lock context's async
   * hooks each promise allocates more).
   */
  private runWith(
    given: ActiveHold | undefined,
    needed: readonly string[],
    b: Behaviour,
    fn: () => unknown,
    parent: LockScope | undefined,
    segment?: number,
    signal?: AbortSignal,
    entered = NONE,
    chain?: HeldChain,
  ): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const call: HeldCall = { needed, b, fn, parent, segment, entered, chain, resolve, reject };
      if (given || needed.length === 0) return this.runHeld(given, call);
      let acquiring: Promise<Lease>;
      try {
        acquiring = b.client.acquire(needed, acquireRequest(b, signal));
      } catch (err) {
        return notTaken(call, this.refused(err, b));
      }
      acquiring.then(
        (lease) => {
          let hold: ActiveHold;
          try {
            hold = this.holds.start(lease, b);
          } catch (err) {
            return notTaken(call, err);
          }
          this.runHeld(hold, call);
        },
        (err: unknown) => notTaken(call, this.refused(err, b)),
      );
    });
  }

  /**
   * Runs the call's method under `hold` (taken for it), or in the holds it re-entered only
   * (`hold` undefined: it runs in its caller's context); its promise settles once the call has
   * left them all (after the release, when it was the last call in a hold).
   */
  private runHeld(hold: ActiveHold | undefined, call: HeldCall): void {
    const { b, resolve, reject, entered } = call;
    const scope = hold
      ? new HoldScope(hold, b.clientName, call.needed, call.parent, call.segment, call.chain)
      : (call.parent as LockScope);
    let result: unknown;
    try {
      result = hold ? LockContext.run(scope, call.fn) : call.fn();
    } catch (err) {
      return endCall(hold, entered, () => reject(err));
    }
    if (isObservable(result)) {
      const end = () => new Promise<void>((ended) => endCall(hold, entered, ended));
      return resolve(heldObservable(result, scope, end));
    }
    // As `await result` would: a thenable is followed, any other value is the result.
    Promise.resolve(result).then(
      (value) => endCall(hold, entered, () => resolve(value)),
      (err: unknown) => endCall(hold, entered, () => reject(err)),
    );
  }

  /** An acquire that failed: told to the `busy` / `error` listeners, and the error to throw. */
  private refused(err: unknown, b: Behaviour): unknown {
    this.events.refused(err, b.clientName);
    return this.holds.estimated(err, b);
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
          await b.client
            .acquire(keys, {
              ttl,
              waitTimeout: b.waitTimeout,
              signal,
              seenBusy: true,
              acks: b.acks,
            })
            .catch((err: unknown) => {
              if (err instanceof LockNotAcquiredError) return err.retryAfterMs;
              throw err;
            })
        : await b.client.tryAcquire(keys, ttl, b.acks);
    return typeof r === 'number' ? r : this.holds.start(r, b);
  }
}

/** The call's keys were not taken: it leaves the holds it re-entered, then its caller hears. */
function notTaken(call: HeldCall, err: unknown): void {
  if (call.entered.length === 0) return call.reject(err);
  leaveAll(call.entered, () => call.reject(err));
}

/** A call ended: it leaves the hold taken for it, then those it re-entered, then `done`. */
function endCall(
  hold: ActiveHold | undefined,
  entered: readonly HoldRecord[],
  done: () => void,
): void {
  if (!hold) return leaveAll(entered, done);
  if (entered.length === 0) return hold.leave(done);
  hold.leave(() => leaveAll(entered, done));
}

function sortUnique(keys: readonly string[]): readonly string[] {
  if (keys.length === 1) return keys;
  return [...new Set(keys)].sort();
}
