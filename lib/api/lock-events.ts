import { EventEmitter } from 'node:events';
import type { ModuleRef } from '@nestjs/core';
import {
  LockBackendError,
  LockConfigError,
  type LockOrderEdge,
  type LockLostError,
  LockNotAcquiredError,
} from '../errors';
import { loadOptionalPeer } from '../optional-peer';
import { UNKNOWN_LOCK_EVENT } from './api.messages';

/** What every lock event tells: which lock. */
export interface LockEventBase {
  /** The rendered keys, sorted (without `keyPrefix`). */
  readonly keys: readonly string[];
  /** The client group. */
  readonly client: string;
}

/** A lock event about a hold: its fencing token too. */
export interface LockHoldEvent extends LockEventBase {
  /** The fencing token of the first key. */
  readonly fence: number;
}

/** What an `acquired` listener receives: a call took its lock (not a reentrant call). */
export interface LockAcquiredEvent extends LockHoldEvent {
  /** How long the call waited for the lock, in ms. */
  readonly waitedMs: number;
}

/** What a `released` listener receives: the holder let go (once per `acquired`). */
export interface LockReleasedEvent extends LockHoldEvent {
  /** From `acquired` to the moment the holder let go, in ms. */
  readonly heldMs: number;
}

/** What a `busy` listener receives: a call gave up, the lock stayed held past `waitTimeout`. */
export interface LockBusyEvent extends LockEventBase {
  /** How long the call waited before giving up, in ms. */
  readonly waitedMs: number;
}

/** What a `lost` listener receives. */
export interface LockLostEvent extends LockHoldEvent {
  /** `error.reason`: `lost`, `expired`, `maxHold` or `shutdown`. */
  readonly error: LockLostError;
}

/** What an `error` listener receives: Redis failed a call's acquire, or a release. */
export interface LockErrorEvent extends LockEventBase {
  /** `release`: the lease then expires by itself. */
  readonly operation: 'acquire' | 'release';
  readonly error: LockBackendError;
}

/**
 * What a `lockOrder` listener receives: a cycle of lock orders that can deadlock, once per cycle
 * (with `lockOrder: 'warn'` or `'throw'`).
 */
export interface LockOrderEvent extends LockEventBase {
  /** The cycle, starting with the edge that closed it (`keys` are that call's, if it was here). */
  readonly cycle: readonly LockOrderEdge[];
  /** The report the module logs: the edges and a "possible deadlock" table. */
  readonly report: string;
}

/**
 * Events of `LockService` (`locks.on('acquired', listener)`), also emitted as Nest events
 * `nest-locked.<name>` when `@nestjs/event-emitter` is in the application.
 */
export interface LockServiceEvents {
  /** A call took its lock (reentrant calls take nothing and emit nothing). */
  acquired: (event: LockAcquiredEvent) => void;
  /** The holder let go; emitted once per `acquired`, after the release was sent. */
  released: (event: LockReleasedEvent) => void;
  /** A call gave up: still busy after `waitTimeout` (also with `onBusy: 'skip'`). */
  busy: (event: LockBusyEvent) => void;
  /** A held lock was lost while its call still ran (the signal aborted at the same moment). */
  lost: (event: LockLostEvent) => void;
  /** Redis failed: an acquire (the call got a `LockBackendError`) or a release. */
  error: (event: LockErrorEvent) => void;
  /** A cycle of lock orders was found (see the module's `lockOrder`). */
  lockOrder: (event: LockOrderEvent) => void;
}

/** The name of a lock event. */
export type LockEventName = keyof LockServiceEvents;

/** The payload of each lock event. */
export type LockEventPayload<E extends LockEventName> = Parameters<LockServiceEvents[E]>[0];

/**
 * The Nest event names, `nest-locked.acquired` and so on, for `@OnEvent`.
 *
 * @example
 * ```ts
 * @OnEvent(LOCK_NEST_EVENTS.lost)
 * onLost(event: LockLostEvent) {
 *   this.alerts.raise(`lock ${event.keys.join()} lost: ${event.error.reason}`);
 * }
 * ```
 * @publicApi
 */
export const LOCK_NEST_EVENTS = Object.freeze({
  acquired: 'nest-locked.acquired',
  released: 'nest-locked.released',
  busy: 'nest-locked.busy',
  lost: 'nest-locked.lost',
  error: 'nest-locked.error',
  lockOrder: 'nest-locked.lockOrder',
} as const satisfies Record<LockEventName, string>);

const NAMES = Object.keys(LOCK_NEST_EVENTS) as LockEventName[];

/** What the hub uses of `@nestjs/event-emitter`'s EventEmitter2. @internal */
export interface NestEventBus {
  emit(event: string, value: unknown): unknown;
  hasListeners(event: string): boolean;
}

/**
 * The application's EventEmitter2, when `@nestjs/event-emitter` is installed and its
 * `EventEmitterModule` imported; otherwise undefined (nothing of it is loaded before).
 * @internal
 */
export function findNestEventBus(moduleRef: ModuleRef): NestEventBus | undefined {
  const pkg = loadOptionalPeer<{ EventEmitter2: abstract new () => NestEventBus }>(
    '@nestjs/event-emitter',
  );
  if (!pkg) return undefined;
  try {
    return moduleRef.get(pkg.EventEmitter2, { strict: false });
  } catch {
    // Installed, but EventEmitterModule is not imported: no bus to emit on.
    return undefined;
  }
}

/** Receives every event once someone observes it (telemetry). @internal */
export interface LockEventSink {
  record<E extends LockEventName>(event: E, payload: LockEventPayload<E>): void;
}

/**
 * Who observes lock events: local listeners, the Nest event bus and telemetry. An emission point
 * reads the event's flag first (`if (events.acquired && events.wants('acquired'))`), so with
 * nobody observing no payload is built and nothing is called: a flag is a field, kept up to
 * date by `on`/`off`/`connect`.
 * @internal
 */
export class LockEvents {
  acquired = false;
  released = false;
  busy = false;
  lost = false;
  error = false;
  lockOrder = false;
  private readonly local = new EventEmitter();
  private bus?: NestEventBus;
  private sink?: LockEventSink;
  /** Refusals already reported: an error rethrown by an outer call is the same object. */
  private readonly reported = new WeakSet<object>();

  constructor(private readonly listenerFailed: (event: string, error: unknown) => void) {}

  /** @throws LockConfigError for a name that is not a lock event (from plain JavaScript) */
  on<E extends LockEventName>(event: E, listener: LockServiceEvents[E]): void {
    if (!NAMES.includes(event)) {
      throw new LockConfigError(UNKNOWN_LOCK_EVENT(String(event), NAMES), 'LockService.on');
    }
    this.local.on(event, listener);
    this.update(event);
  }

  off<E extends LockEventName>(event: E, listener: LockServiceEvents[E]): void {
    this.local.off(event, listener);
    this.update(event);
  }

  /** Observers found at startup: the application's EventEmitter2, telemetry. */
  connect(bus: NestEventBus | undefined, sink: LockEventSink | undefined): void {
    this.bus = bus;
    this.sink = sink;
    for (const name of NAMES) this.update(name);
  }

  /**
   * Whether anyone takes `event` right now; read only once its flag is set. The Nest bus is asked
   * here, per event: its listeners (`@OnEvent`) are registered after this module starts.
   */
  wants(event: LockEventName): boolean {
    return (
      this.sink !== undefined ||
      this.local.listenerCount(event) > 0 ||
      (this.bus?.hasListeners(LOCK_NEST_EVENTS[event]) ?? false)
    );
  }

  /** Hands `payload` to every observer; a listener that throws is logged, never thrown. */
  emit<E extends LockEventName>(event: E, payload: LockEventPayload<E>): void {
    this.sink?.record(event, payload);
    // Only with a listener of its own: an EventEmitter throws on an 'error' nobody listens to,
    // and telemetry or an @OnEvent handler raise the flag without one (each failed call of an
    // outage would log that throw).
    if (this.local.listenerCount(event) > 0) {
      try {
        this.local.emit(event, payload);
      } catch (err) {
        this.listenerFailed(event, err);
      }
    }
    const name = LOCK_NEST_EVENTS[event];
    if (this.bus?.hasListeners(name)) {
      try {
        this.bus.emit(name, payload);
      } catch (err) {
        this.listenerFailed(name, err);
      }
    }
  }

  /**
   * Reports a call's failure to get its lock: `busy` for contention, `error` for Redis. Anything
   * else (a bad key, an abort) is not a lock event. Each error object is reported once.
   */
  refused(err: unknown, client: string): void {
    if (!(this.busy || this.error) || this.reported.has(err as object)) return;
    if (err instanceof LockNotAcquiredError) {
      if (!(this.busy && this.wants('busy'))) return;
      this.reported.add(err);
      this.emit('busy', { keys: err.keys, client, waitedMs: err.waitedMs });
    } else if (err instanceof LockBackendError) {
      if (!(this.error && this.wants('error'))) return;
      this.reported.add(err);
      this.emit('error', { keys: err.keys, client, operation: 'acquire', error: err });
    }
  }

  private update(event: LockEventName): void {
    this[event] =
      this.local.listenerCount(event) > 0 || this.bus !== undefined || this.sink !== undefined;
  }
}
