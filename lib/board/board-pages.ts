import type { BoardNodeState } from '../core/board-source';
import type { BoardEvent } from './board-recorder';
import type { HoldMode } from './instance-view';

/*
 * What the board's HTTP API answers (the page's JSON): the overview and a key's page, and
 * their rows. `board-data.ts` builds them.
 */

/** A held key, one row. */
export interface BoardHeld {
  readonly group: string;
  readonly key: string;
  readonly mode: HoldMode;
  /** The holding instance(s); null when none publishes it. */
  readonly instance: string | null;
  /** A few characters of the token, enough to tell holders apart, never the whole token. */
  readonly token: string | null;
  readonly fence: number | null;
  readonly heldMs: number | null;
  readonly leaseLeftMs: number | null;
  readonly renewals: number | null;
  readonly holders: number;
}

export interface BoardWaiter {
  readonly instance: string | null;
  readonly token: string | null;
  readonly mode: HoldMode;
  /** null when neither the server nor the waiter's instance tells since when it waits. */
  readonly waitedMs: number | null;
  readonly deadlineInMs: number | null;
  /**
   * It waits inside its process, behind another caller of the same process or its hold (on one
   * Redis node a process queues one caller per key in Redis): it has no place in the line yet.
   */
  readonly inProcess: boolean;
}

export interface BoardLine {
  readonly group: string;
  readonly key: string;
  /** Callers waiting for the key across processes: all of them if `complete`, else at least. */
  readonly length: number;
  /**
   * false when the board cannot see every waiter: a process that does not publish may have
   * callers behind its one in the Redis queue, a queue was read in part, or the backend's other
   * processes are not read (only this instance's view).
   */
  readonly complete: boolean;
  /** The line's first waiters in order, then (Redis) those waiting inside their process. */
  readonly waiters: BoardWaiter[];
}

/** The hot-key chart: one point per step. */
export interface BoardSeries {
  /** Step starts, epoch seconds. */
  readonly t: number[];
  readonly acquiresPerSec: number[];
  /** Busy answers over all answers, 0..1 (null with none). */
  readonly busyRate: Array<number | null>;
  readonly p50: Array<number | null>;
  readonly p99: Array<number | null>;
}

export interface BoardHotKey {
  readonly group: string;
  readonly key: string;
  readonly acquiresPerSec: number;
  readonly busyRate: number | null;
  readonly p50: number | null;
  readonly p99: number | null;
}

export interface BoardInstance {
  readonly name: string;
  readonly host: string;
  readonly pid: number;
  readonly groups: string[];
  /** ms since it last published. */
  readonly seenMs: number;
  readonly self: boolean;
}

/** A lock server of a group, as the page lists it. */
export interface BoardNode extends BoardNodeState {
  readonly group: string;
  readonly backend: string;
}

export interface BoardOverview {
  readonly now: number;
  readonly self: string;
  readonly actions: boolean;
  readonly groups: Array<{ name: string; backend: string }>;
  /** Per group, what its columns cannot tell on its backend, and why (the page's legend). */
  readonly legends: Array<{ group: string; text: string }>;
  readonly instances: BoardInstance[];
  readonly held: {
    readonly total: number;
    readonly page: number;
    readonly pages: number;
    /** false when a scan stopped at `maxScan`: the total is a lower bound. */
    readonly complete: boolean;
    readonly rows: BoardHeld[];
  };
  readonly lines: BoardLine[];
  readonly hot: { readonly series: BoardSeries; readonly keys: BoardHotKey[] };
  readonly events: BoardEvent[];
  readonly nodes: BoardNode[];
}

export interface BoardKeyPage {
  readonly now: number;
  readonly group: string;
  readonly key: string;
  readonly actions: boolean;
  readonly held: BoardHeld[];
  readonly line: BoardLine | null;
  readonly series: BoardSeries;
  /** Its lost, expired, error and forced events, newest first. */
  readonly events: BoardEvent[];
  /** Its last busy answers, newest first. */
  readonly busy: BoardEvent[];
}
