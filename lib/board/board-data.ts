import type { LockBackend } from '../core/lock-backend';
import type { BoardEvent, BoardEventType } from './board-recorder';
import {
  type HoldMode,
  type HoldView,
  type InstanceView,
  modeOf,
  VIEW_LIMIT,
  type WaitView,
} from './instance-view';
import { STEP_MS, STEPS, type StepCounts } from './key-rates';
import {
  LINE_LIMIT,
  type RedisBoardStore,
  type ScanResult,
  type StoredLine,
  type StoredLock,
} from '../redis/redis-board-store';
import { addSparse, quantile } from './wait-histogram';

/** Rows per page of held locks. */
export const PAGE_SIZE = 50;
/** Waiting lines shown on the overview besides those of the page's keys. */
const LINES_SHOWN = 20;
/** Queues measured to find the longest lines. */
const LINES_MEASURED = 200;
/** Events shown on the overview; a key's page shows up to 100 of its own. */
export const EVENTS_SHOWN = 25;

/** One client group as the board reads it. */
export interface BoardGroup {
  readonly name: string;
  readonly backend: string;
  readonly client: LockBackend;
  /** Redis groups: where views, events, locks and queues are read. */
  readonly store?: RedisBoardStore;
  /** Redis groups on one node queue their waiters in Redis (quorums race). */
  readonly queued: boolean;
  /**
   * The backend lives in this process (`memory`): what this instance publishes is every hold and
   * waiter there is. Other backends' other processes are not read (yet): their lines are lower
   * bounds.
   */
  readonly inProcess: boolean;
  /** Redis groups: the prefix of this process's tokens (it names the instance in queues). */
  readonly tokenPrefix?: string;
}

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
  readonly waitedMs: number;
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

export interface BoardNode {
  readonly group: string;
  readonly backend: string;
  readonly node: string;
  readonly status: 'up' | 'down';
  readonly latencyMs?: number;
  readonly role?: string;
  readonly warning?: string;
  readonly error?: string;
}

export interface BoardOverview {
  readonly now: number;
  readonly self: string;
  readonly actions: boolean;
  readonly groups: Array<{ name: string; backend: string }>;
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

/** What one group's data comes from on this request. */
export interface GroupSources {
  readonly group: BoardGroup;
  /** Every live instance's view of the group (this one's fresh). */
  readonly views: InstanceView[];
  /** Redis: the server's clock, ms; else this process's. */
  readonly serverNow: number;
}

/** A token shown on the board: the first characters of its prefix and its counter. */
export function tokenHint(token: string): string {
  const dot = token.lastIndexOf('.');
  return dot < 0 ? `${token.slice(0, 4)}…` : `${token.slice(0, 4)}….${token.slice(dot + 1)}`;
}

/** Who holds or waits with `token`: the instance whose token prefix it carries. */
export class Holders {
  private readonly prefixes = new Map<string, string>();
  private readonly holds = new Map<string, HoldView>();

  constructor(views: readonly InstanceView[]) {
    for (const view of views) {
      if (view.tokenPrefix) this.prefixes.set(view.tokenPrefix, view.name);
      for (const hold of view.holds) this.holds.set(`${hold.token}\n${hold.key}`, hold);
    }
  }

  instance(token: string): string | null {
    const dot = token.lastIndexOf('.');
    return this.prefixes.get(dot < 0 ? token : token.slice(0, dot)) ?? null;
  }

  hold(token: string, key: string): HoldView | undefined {
    return this.holds.get(`${token}\n${key}`);
  }
}

/** The held row of a lock found in Redis. */
export function heldFromRedis(
  group: string,
  lock: StoredLock,
  holders: Holders,
  serverNow: number,
  now: number,
): BoardHeld | undefined {
  if (lock.value === null) return undefined;
  const leaseLeftMs = lock.pttl >= 0 ? lock.pttl : null;
  if (lock.value.startsWith('\0')) {
    const kind = lock.value.slice(1);
    const mode: HoldMode = kind === 'r' ? 'read' : `permits ${Number(kind)}`;
    const live = lock.shares.filter(([, end]) => end > serverNow);
    const names = [...new Set(live.map(([t]) => holders.instance(t) ?? '?'))];
    const first = live[0] && holders.hold(live[0][0], lock.key);
    return {
      group,
      key: lock.key,
      mode,
      instance: names.length ? names.join(', ') : null,
      token: live[0] ? tokenHint(live[0][0]) : null,
      fence: first?.fence ?? null,
      heldMs: first ? now - first.since : null,
      leaseLeftMs,
      renewals: first?.renewals ?? null,
      holders: live.length,
    };
  }
  const hold = holders.hold(lock.value, lock.key);
  return {
    group,
    key: lock.key,
    mode: hold?.mode ?? 'exclusive',
    instance: holders.instance(lock.value),
    token: tokenHint(lock.value),
    fence: hold?.fence ?? null,
    heldMs: hold ? now - hold.since : null,
    leaseLeftMs,
    renewals: hold?.renewals ?? null,
    holders: 1,
  };
}

/** The held rows of a group no other process can read: what its instances publish. */
export function heldFromViews(
  group: string,
  views: readonly InstanceView[],
  now: number,
): BoardHeld[] {
  const byKey = new Map<string, Array<{ view: InstanceView; hold: HoldView }>>();
  for (const view of views) {
    for (const hold of view.holds) {
      const list = byKey.get(hold.key) ?? [];
      list.push({ view, hold });
      byKey.set(hold.key, list);
    }
  }
  return [...byKey].map(([key, list]) => {
    const { hold } = list[0];
    return {
      group,
      key,
      mode: hold.mode,
      instance: [...new Set(list.map((h) => h.view.name))].join(', '),
      token: tokenHint(hold.token),
      fence: hold.fence,
      heldMs: now - hold.since,
      leaseLeftMs: Math.max(0, hold.validUntil - now),
      renewals: hold.renewals,
      holders: list.length,
    };
  });
}

/**
 * A key's Redis queue (one node) as a line: its waiters in order, each with its instance, wait
 * and deadline (server clock), then the callers waiting inside their process (from the views),
 * which Redis does not see; the count is every caller when each queued one is attributed.
 */
export function lineFromRedis(
  group: string,
  line: StoredLine,
  holders: Holders,
  views: readonly InstanceView[],
  serverNow: number,
  now: number,
): BoardLine {
  const queued = line.waiters.map((w): BoardWaiter => {
    // Meta: "<lease ms>:<deadline ms>[:r|:<N>]".
    const [, deadline, kind] = (w.meta ?? '').split(':');
    const share = kind === 'r' ? 'read' : kind ? Number(kind) : undefined;
    const deadlineMs = Number(deadline);
    return {
      instance: holders.instance(w.token),
      token: tokenHint(w.token),
      mode: modeOf(share),
      waitedMs: Math.max(0, serverNow - Math.floor(w.queuedUs / 1000)),
      deadlineInMs: Number.isFinite(deadlineMs) && deadline ? deadlineMs - serverNow : null,
      inProcess: false,
    };
  });
  const inProcess = waitersOf(views, line.key, now, (w) => !w.queued, true);
  return {
    group,
    key: line.key,
    length: line.length + inProcess.length,
    complete:
      line.waiters.length === line.length &&
      queued.every((w) => w.instance !== null) &&
      views.every((v) => v.waiting.length < VIEW_LIMIT),
    waiters: [...queued, ...inProcess.slice(0, LINE_LIMIT)],
  };
}

/** The callers of every view waiting for `key` that `pick` keeps, oldest first. */
function waitersOf(
  views: readonly InstanceView[],
  key: string,
  now: number,
  pick: (w: WaitView) => boolean,
  inProcess: boolean,
): BoardWaiter[] {
  return views
    .flatMap((view) =>
      view.waiting.filter((w) => w.key === key && pick(w)).map((w) => ({ view, w })),
    )
    .sort((x, y) => x.w.since - y.w.since)
    .map(({ view, w }) => ({
      instance: view.name,
      token: null,
      mode: w.mode,
      waitedMs: now - w.since,
      deadlineInMs: w.deadline === undefined ? null : w.deadline - now,
      inProcess,
    }));
}

/** Keys some caller of the views waits for inside its process (not queued in Redis). */
export function keysWaitedInProcess(views: readonly InstanceView[]): Set<string> {
  const keys = new Set<string>();
  for (const view of views) for (const w of view.waiting) if (!w.queued) keys.add(w.key);
  return keys;
}

/**
 * The lines of a group no other process can read: each instance's own waiters, by arrival.
 * `complete`: the views are every waiter there is (a backend inside this process).
 */
export function linesFromViews(
  group: string,
  views: readonly InstanceView[],
  now: number,
  complete: boolean,
): BoardLine[] {
  const keys = new Set(views.flatMap((v) => v.waiting.map((w) => w.key)));
  return [...keys].map((key) => {
    const waiters = waitersOf(views, key, now, () => true, false);
    return {
      group,
      key,
      length: waiters.length,
      complete: complete && views.every((v) => v.waiting.length < VIEW_LIMIT),
      waiters: waiters.slice(0, LINE_LIMIT),
    };
  });
}

/** The `LINES_SHOWN` longest lines, plus those of the keys on the page (`group\nkey`). */
export function longestLines(lines: BoardLine[], pageKeys: ReadonlySet<string>): BoardLine[] {
  const sorted = [...lines].sort((a, b) => b.length - a.length);
  return sorted.filter((l, i) => i < LINES_SHOWN || pageKeys.has(`${l.group}\n${l.key}`));
}

/** Step counts of many instances added by step. */
function mergeSteps(lists: ReadonlyArray<readonly StepCounts[] | undefined>): Map<number, Merged> {
  const steps = new Map<number, Merged>();
  for (const list of lists) {
    for (const s of list ?? []) {
      const m = steps.get(s.t) ?? { acquires: 0, busy: 0, waits: [] };
      m.acquires += s.acquires;
      m.busy += s.busy;
      addSparse(m.waits, s.waits);
      steps.set(s.t, m);
    }
  }
  return steps;
}

interface Merged {
  acquires: number;
  busy: number;
  waits: number[];
}

/**
 * The chart of merged steps: every step of the window, up to the one in progress (divided by
 * its elapsed time). A step without data is a point too, never left out (a chart would draw a
 * line across it): zero acquires (the truth), and no busy rate or wait (a gap). No series at all
 * when nothing happened in the window.
 */
export function seriesOf(
  lists: ReadonlyArray<readonly StepCounts[] | undefined>,
  now: number,
): BoardSeries {
  const steps = mergeSteps(lists);
  const series: BoardSeries = { t: [], acquiresPerSec: [], busyRate: [], p50: [], p99: [] };
  const current = now - (now % STEP_MS);
  const first = current - (STEPS - 1) * STEP_MS;
  if (![...steps.keys()].some((t) => t >= first && t <= current)) return series;
  for (let t = first; t <= current; t += STEP_MS) {
    const m = steps.get(t) ?? { acquires: 0, busy: 0, waits: [] };
    const seconds = Math.max(1, Math.min(STEP_MS, now - t)) / 1000;
    const answers = m.acquires + m.busy;
    series.t.push(t / 1000);
    series.acquiresPerSec.push(Math.round((m.acquires / seconds) * 100) / 100);
    series.busyRate.push(answers ? m.busy / answers : null);
    series.p50.push(quantile(m.waits, 0.5));
    series.p99.push(quantile(m.waits, 0.99));
  }
  return series;
}

/** The hottest keys over the window, across instances. */
export function hotKeys(sources: readonly GroupSources[], now: number, limit = 10): BoardHotKey[] {
  const out: Array<BoardHotKey & { weight: number }> = [];
  for (const { group, views } of sources) {
    const keys = new Set(views.flatMap((v) => Object.keys(v.rates.keys)));
    for (const key of keys) {
      const merged = [...mergeSteps(views.map((v) => v.rates.keys[key])).values()];
      const total: Merged = { acquires: 0, busy: 0, waits: [] };
      let first = now;
      for (const [t] of mergeSteps(views.map((v) => v.rates.keys[key]))) first = Math.min(first, t);
      for (const m of merged) {
        total.acquires += m.acquires;
        total.busy += m.busy;
        m.waits.forEach((n, b) => (total.waits[b] = (total.waits[b] ?? 0) + (n ?? 0)));
      }
      const answers = total.acquires + total.busy;
      const seconds = Math.max(1, now - first) / 1000;
      out.push({
        group: group.name,
        key,
        acquiresPerSec: Math.round((total.acquires / seconds) * 100) / 100,
        busyRate: answers ? total.busy / answers : null,
        p50: quantile(total.waits, 0.5),
        p99: quantile(total.waits, 0.99),
        weight: answers,
      });
    }
  }
  return out
    .sort((a, b) => b.weight - a.weight)
    .slice(0, limit)
    .map(({ weight: _weight, ...k }) => k);
}

/** The instances of every group, one row each. */
export function instancesOf(
  sources: readonly GroupSources[],
  selfId: string,
  now: number,
): BoardInstance[] {
  const byId = new Map<string, BoardInstance & { groups: string[] }>();
  for (const { group, views } of sources) {
    for (const v of views) {
      const row = byId.get(v.id) ?? {
        name: v.name,
        host: v.host,
        pid: v.pid,
        groups: [],
        seenMs: now - v.at,
        self: v.id === selfId,
      };
      row.groups.push(group.name);
      byId.set(v.id, { ...row, seenMs: Math.min(row.seenMs, now - v.at) });
    }
  }
  return [...byId.values()].sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * The Redis queues of up to `LINES_MEASURED` keys (and those of `pageKeys`), and a line with no
 * queue for each key of `inProcess` that has none (its callers wait inside their process).
 */
export async function linesOfRedis(
  store: RedisBoardStore,
  scan: ScanResult,
  pageKeys: ReadonlySet<string>,
  inProcess: ReadonlySet<string>,
): Promise<StoredLine[]> {
  const wanted = new Set(scan.queues.slice(0, LINES_MEASURED));
  for (const key of scan.queues) if (pageKeys.has(key)) wanted.add(key);
  for (const key of inProcess) if (wanted.size < 2 * LINES_MEASURED) wanted.add(key);
  const lines = await store.lines([...wanted]);
  const read = new Set(lines.map((l) => l.key));
  for (const key of inProcess) if (!read.has(key)) lines.push({ key, length: 0, waiters: [] });
  return lines;
}

/**
 * Which events a list shows: `problems` (lost, expired, error, forced: the default, busy answers
 * are counted in the charts), `all`, or one type.
 */
export type EventFilter = 'problems' | 'all' | BoardEventType;

/** Whether `filter` shows events of `type`. */
export function shows(filter: EventFilter, type: BoardEventType): boolean {
  if (filter === 'all') return true;
  if (filter === 'problems') return type !== 'busy';
  return filter === type;
}

/** Events of several groups, newest first. */
export function newestEvents(
  lists: ReadonlyArray<readonly BoardEvent[]>,
  filter: EventFilter,
  key?: string,
  limit = EVENTS_SHOWN,
): BoardEvent[] {
  return lists
    .flat()
    .filter((e) => key === undefined || e.key.split(', ').includes(key))
    .filter((e) => shows(filter, e.type))
    .sort((a, b) => b.t - a.t)
    .slice(0, limit);
}
