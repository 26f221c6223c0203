import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import type { LockService } from '../api/lock.service';
import type { BoardMode } from '../core/board-source';
import type { LockBackend, Share } from '../core/lock-backend';
import type { BoardRecorder } from './board-recorder';
import type { GroupRates } from './key-rates';

/** Holds and waits one instance publishes per group at most (its oldest). */
export const VIEW_LIMIT = 1_000;

/** How a key is held. */
export type HoldMode = BoardMode;

/** A hold of this instance, one per key. */
export interface HoldView {
  readonly key: string;
  /** Never sent to a browser: matches the holder's token the lock server keeps. */
  readonly token: string;
  readonly fence: number;
  readonly mode: HoldMode;
  /** Epoch ms. */
  readonly since: number;
  readonly ttl: number;
  /** When the lease is certainly over unless renewed, epoch ms. */
  readonly validUntil: number;
  /** Renewals so far, derived: the watchdog renews every ttl/3 (0 without a watchdog). */
  readonly renewals: number;
}

/** A caller of this instance waiting for a key. */
export interface WaitView {
  readonly key: string;
  readonly since: number;
  readonly deadline?: number;
  readonly mode: HoldMode;
  /** It has (or may have) an entry in the server's line of the key, which the board reads. */
  readonly queued?: boolean;
}

/** What one instance tells the board about one client group. */
export interface InstanceView {
  /** Unique per process start. */
  readonly id: string;
  readonly name: string;
  readonly host: string;
  readonly pid: number;
  /** When it was published, epoch ms. */
  readonly at: number;
  readonly group: string;
  /** `redis`, `memory`, `postgres`... */
  readonly backend: string;
  /**
   * What names this process on the group's lock server (`BoardSource.owner`): the server's rows
   * with the same owner are this instance's.
   */
  readonly owner?: string;
  readonly holds: HoldView[];
  /** True when it holds more than it published. */
  readonly holdsCut: boolean;
  readonly waiting: WaitView[];
  readonly rates: GroupRates;
}

/** The mode of a share (or of the exclusive lock). */
export function modeOf(share: Share | undefined, permits?: number): HoldMode {
  if (share === 'read') return 'read';
  if (typeof share === 'number') return `permits ${share}`;
  if (permits !== undefined && permits > 1) return `permits ${permits}`;
  return 'exclusive';
}

/**
 * Builds what this process publishes about each group: its holds (read from `LockService` on
 * demand, nothing recorded per lock), its waiters where the backend tells them, and its rates.
 * @internal
 */
export class InstanceViews {
  readonly host = hostname();

  constructor(
    readonly id: string,
    readonly name: string,
    private readonly locks: LockService,
    private readonly recorder: BoardRecorder,
  ) {}

  /** The view of `group`, whose backend is `client`. */
  of(group: string, backend: string, client: LockBackend, owner?: string): InstanceView {
    const now = Date.now();
    // Leases keep performance.now() times: this turns them into epoch ms.
    const offset = now - performance.now();
    const holds: HoldView[] = [];
    let holdsCut = false;
    for (const hold of this.locks.heldNow()) {
      if (hold.client !== client || !hold.active) continue;
      const { lease } = hold;
      if (holds.length + lease.keys.length > VIEW_LIMIT) {
        holdsCut = true;
        break;
      }
      const renewals = hold.watchdog ? Math.floor((now - lease.acquiredAt) / (lease.ttl / 3)) : 0;
      lease.keys.forEach((key, i) =>
        holds.push({
          key,
          token: lease.token,
          fence: lease.fences[i] ?? lease.fences[0],
          mode: modeOf(lease.share, hold.permits),
          since: lease.acquiredAt,
          ttl: lease.ttl,
          validUntil: Math.round(lease.validUntil + offset),
          renewals: Math.max(0, renewals),
        }),
      );
    }
    const waiting = (client.waitingNow?.(VIEW_LIMIT) ?? []).map((w) => ({
      key: w.key,
      since: w.since,
      deadline: w.deadline,
      mode: modeOf(w.share),
      ...(w.queued && { queued: true }),
    }));
    return {
      id: this.id,
      name: this.name,
      host: this.host,
      pid: process.pid,
      at: now,
      group,
      backend,
      owner,
      holds,
      holdsCut,
      waiting,
      rates: this.recorder.rates.snapshot(group),
    };
  }
}
