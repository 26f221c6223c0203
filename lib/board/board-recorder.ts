import type {
  LockAcquiredEvent,
  LockBusyEvent,
  LockErrorEvent,
  LockLostEvent,
} from '../api/lock-events';
import type { LockService } from '../api/lock.service';
import { KeyRates } from './key-rates';

/** What the board lists as an event. */
export type BoardEventType = 'lost' | 'expired' | 'busy' | 'error' | 'forced';

/** One recent event, as stored in a group's stream and shown on the board. */
export interface BoardEvent {
  /** Epoch ms. */
  readonly t: number;
  readonly type: BoardEventType;
  /** The instance it happened in (for `forced`: the instance that served the release). */
  readonly instance: string;
  readonly group: string;
  readonly key: string;
  /** The reason, the error, or who forced a release. */
  readonly detail?: string;
}

/** Events kept in memory for the local view, per process. */
const LOCAL_EVENTS = 200;
/** `busy` events listed per second at most: under a storm the counts stay exact, the list not. */
const BUSY_PER_SECOND = 20;

/**
 * Listens to `LockService` events for the board: counts acquires, busy answers and waits per key
 * (O(1) per event), and keeps the recent `lost` / `busy` / `error` events until they are
 * published. It exists only when `LockBoardModule` is imported: without it the service emits
 * nothing (no listener, no payload built).
 * @internal
 */
export class BoardRecorder {
  readonly rates = new KeyRates();
  /** The last events of this process, newest last. */
  private readonly recent: BoardEvent[] = [];
  /** Events not yet published, per group. */
  private readonly unpublished = new Map<string, BoardEvent[]>();
  private busyThisSecond = 0;
  private busySecond = 0;
  private readonly listeners = {
    acquired: (e: LockAcquiredEvent) => this.rates.record(e.client, e.keys, e.waitedMs, false),
    busy: (e: LockBusyEvent) => {
      this.rates.record(e.client, e.keys, e.waitedMs, true);
      const second = Math.floor(Date.now() / 1000);
      if (second !== this.busySecond) {
        this.busySecond = second;
        this.busyThisSecond = 0;
      }
      if (this.busyThisSecond++ < BUSY_PER_SECOND) {
        this.add('busy', e.client, e.keys, `gave up after ${Math.round(e.waitedMs)} ms`);
      }
    },
    lost: (e: LockLostEvent) => {
      const reason = e.error.reason;
      this.add(
        reason === 'expired' || reason === 'maxHold' ? 'expired' : 'lost',
        e.client,
        e.keys,
        reason,
      );
    },
    error: (e: LockErrorEvent) =>
      this.add('error', e.client, e.keys, `${e.operation}: ${e.error.message}`),
  };

  constructor(
    private readonly locks: LockService,
    readonly instance: string,
  ) {}

  start(): void {
    this.locks.on('acquired', this.listeners.acquired);
    this.locks.on('busy', this.listeners.busy);
    this.locks.on('lost', this.listeners.lost);
    this.locks.on('error', this.listeners.error);
  }

  stop(): void {
    this.locks.off('acquired', this.listeners.acquired);
    this.locks.off('busy', this.listeners.busy);
    this.locks.off('lost', this.listeners.lost);
    this.locks.off('error', this.listeners.error);
  }

  /** Records an event of the board itself (a force release, with who did it). */
  add(type: BoardEventType, group: string, keys: readonly string[], detail?: string): void {
    const event: BoardEvent = {
      t: Date.now(),
      type,
      instance: this.instance,
      group,
      key: keys.join(', '),
      detail,
    };
    this.recent.push(event);
    if (this.recent.length > LOCAL_EVENTS) this.recent.shift();
    let pending = this.unpublished.get(group);
    if (!pending) this.unpublished.set(group, (pending = []));
    if (pending.length < LOCAL_EVENTS) pending.push(event);
  }

  /** This process's recent events, newest first. */
  events(): BoardEvent[] {
    return [...this.recent].reverse();
  }

  /** The events of `group` since the last call, for its stream. */
  takeUnpublished(group: string): BoardEvent[] {
    const pending = this.unpublished.get(group) ?? [];
    this.unpublished.delete(group);
    return pending;
  }
}
