import type { BoardHeldKey, BoardHolder, BoardKeyLine, BoardSource } from '../core/board-source';
import type { LockBackend } from '../core/lock-backend';
import type { BoardEvent, BoardEventType } from './board-recorder';
import { type HoldView, type InstanceView, VIEW_LIMIT, type WaitView } from './instance-view';
import type {
  BoardHeld,
  BoardHotKey,
  BoardInstance,
  BoardLine,
  BoardSeries,
  BoardWaiter,
} from './board-pages';
import { STEP_MS, STEPS, type StepCounts } from './key-rates';
import { addSparse, quantile } from './wait-histogram';

/** Waiters read and listed per line at most. */
export const LINE_LIMIT = 50;
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
  /** Where the group's lock server is read (every process's holds and lines) and views kept. */
  readonly source?: BoardSource;
  /**
   * The backend lives in this process (`memory`): what this instance publishes is every hold and
   * waiter there is.
   */
  readonly inProcess: boolean;
}

/** What one group's data comes from on this request. */
export interface GroupSources {
  readonly group: BoardGroup;
  /** Every live instance's view of the group (this one's fresh). */
  readonly views: InstanceView[];
  /** The server's clock, ms, where the group has a source; else this process's. */
  readonly serverNow: number;
}

/**
 * A token shown on the board: its first characters and its counter (the part after its last
 * `.`, where the backend's tokens have one), never the whole token.
 */
export function tokenHint(token: string): string {
  // A token that is a path (an etcd key) is told apart by its last part.
  const own = token.slice(token.lastIndexOf('/') + 1);
  const dot = own.lastIndexOf('.');
  return dot < 0 ? `${own.slice(0, 4)}…` : `${own.slice(0, 4)}….${own.slice(dot + 1)}`;
}

/** Who holds or waits on the server: the instance that published the same owner. */
export class Holders {
  private readonly names = new Map<string, string>();
  private readonly byToken = new Map<string, HoldView>();
  private readonly byInstance = new Map<string, HoldView>();
  /** Per key, the instances that publish a hold of it. */
  private readonly byKey = new Map<string, string[]>();

  constructor(views: readonly InstanceView[]) {
    for (const view of views) {
      if (view.owner) this.names.set(view.owner, view.name);
      for (const hold of view.holds) {
        this.byToken.set(`${hold.token}\n${hold.key}`, hold);
        this.byInstance.set(`${view.name}\n${hold.key}`, hold);
        this.byKey.set(hold.key, [...(this.byKey.get(hold.key) ?? []), view.name]);
      }
    }
  }

  instance(who: { readonly owner: string | null }): string | null {
    return who.owner === null ? null : (this.names.get(who.owner) ?? null);
  }

  /**
   * The instance of a holder of `key`: by its owner, else (a server that names no process)
   * the one instance that publishes a hold of the key, if only one does.
   */
  holderOf(holder: BoardHolder, key: string): string | null {
    const named = this.instance(holder);
    if (named !== null || holder.owner !== null) return named;
    const publishing = this.byKey.get(key) ?? [];
    return publishing.length === 1 ? publishing[0] : null;
  }

  /** The published hold of `key` by `holder`: by its token, else by its instance. */
  hold(holder: BoardHolder, key: string): HoldView | undefined {
    const byToken = holder.token && this.byToken.get(`${holder.token}\n${key}`);
    if (byToken) return byToken;
    const name = this.holderOf(holder, key);
    return name === null ? undefined : this.byInstance.get(`${name}\n${key}`);
  }
}

/**
 * The held row of a key the server holds: holder and lease from the server, what only the
 * holder knows (fence where the server keeps none, age, renewals) from its published view.
 */
export function heldFromServer(
  group: string,
  held: BoardHeldKey,
  holders: Holders,
  serverNow: number,
  now: number,
): BoardHeld {
  const first = held.holders[0] as BoardHolder | undefined;
  const hold = first && holders.hold(first, held.key);
  const names = held.holders.map((h) => holders.holderOf(h, held.key));
  const token = first?.token ?? hold?.token;
  let heldMs: number | null = null;
  if (hold) heldMs = now - hold.since;
  else if (first?.since !== undefined) heldMs = Math.max(0, serverNow - first.since);
  let leaseLeftMs = held.leaseLeftMs;
  if (leaseLeftMs === null && hold) leaseLeftMs = Math.max(0, hold.validUntil - now);
  return {
    group,
    key: held.key,
    mode: held.mode === 'exclusive' ? (hold?.mode ?? 'exclusive') : held.mode,
    instance: names.some((n) => n !== null)
      ? [...new Set(names.map((n) => n ?? '?'))].join(', ')
      : null,
    token: token ? tokenHint(token) : null,
    fence: first?.fence ?? hold?.fence ?? null,
    heldMs,
    leaseLeftMs,
    renewals: hold?.renewals ?? null,
    holders: held.holders.length,
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
 * A key's line on the server as a board line: its waiters in order, each with its instance,
 * wait and deadline (server clock; a deadline the server does not keep comes from the
 * waiter's view), then, where a process queues one caller per key (`everyCaller` false), the
 * callers waiting inside their process (from the views), which the server does not see; the
 * count is every caller when each queued one is attributed.
 */
export function lineFromServer(
  group: string,
  line: BoardKeyLine,
  holders: Holders,
  views: readonly InstanceView[],
  times: { readonly serverNow: number; readonly now: number },
  everyCaller: boolean,
): BoardLine {
  const { serverNow, now } = times;
  const deadlines = viewTimes(views, line.key, (w) => w.deadline);
  const sinces = viewTimes(views, line.key, (w) => w.since);
  const queued = line.waiters.map((w): BoardWaiter => {
    const instance = holders.instance(w);
    const viewDeadline = instance === null ? undefined : deadlines.get(instance)?.shift();
    const viewSince = instance === null ? undefined : sinces.get(instance)?.shift();
    let waitedMs: number | null = null;
    if (w.since !== undefined) waitedMs = Math.max(0, serverNow - w.since);
    else if (viewSince !== undefined) waitedMs = Math.max(0, now - viewSince);
    let deadlineInMs: number | null = null;
    if (w.deadline !== undefined) deadlineInMs = w.deadline - serverNow;
    else if (viewDeadline !== undefined) deadlineInMs = viewDeadline - now;
    return {
      instance,
      token: w.token ? tokenHint(w.token) : null,
      mode: w.mode,
      waitedMs,
      deadlineInMs,
      inProcess: false,
    };
  });
  const inProcess = everyCaller ? [] : waitersOf(views, line.key, now, behindQueued(queued), true);
  return {
    group,
    key: line.key,
    length: line.length + inProcess.length,
    complete:
      line.waiters.length === line.length &&
      queued.every((w) => w.instance !== null) &&
      (everyCaller || views.every((v) => v.waiting.length < VIEW_LIMIT)),
    waiters: [...queued, ...inProcess.slice(0, LINE_LIMIT)],
  };
}

/**
 * A pick of the callers of each view that wait inside their process: not the one(s) the server
 * queued (`queued`: the line's waiters it names). A view may be a moment older than the line
 * (its caller queued on the server, the answer not back yet): its oldest callers then stand
 * for its entries in the line, flagged or not, so no caller is counted twice.
 */
function behindQueued(
  queued: readonly BoardWaiter[],
): (w: WaitView, view: InstanceView) => boolean {
  const entries = new Map<string, number>();
  for (const w of queued) {
    if (w.instance !== null) entries.set(w.instance, (entries.get(w.instance) ?? 0) + 1);
  }
  const skipped = new Map<InstanceView, Set<WaitView>>();
  return (w, view) => {
    let skip = skipped.get(view);
    if (!skip) {
      const mine = view.waiting.filter((x) => x.key === w.key).sort((a, b) => a.since - b.since);
      const count = entries.get(view.name) ?? 0;
      const flagged = mine.filter((x) => x.queued);
      const unflagged = mine.filter((x) => !x.queued);
      skip = new Set([...flagged, ...unflagged.slice(0, Math.max(0, count - flagged.length))]);
      skipped.set(view, skip);
    }
    return !skip.has(w);
  };
}

/** Per instance, a time (`of`) of each of its callers waiting for `key`, oldest first. */
function viewTimes(
  views: readonly InstanceView[],
  key: string,
  of: (w: WaitView) => number | undefined,
): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const view of views) {
    const waits = view.waiting.filter((w) => w.key === key).sort((a, b) => a.since - b.since);
    out.set(
      view.name,
      waits.flatMap((w) => {
        const t = of(w);
        return t === undefined ? [] : [t];
      }),
    );
  }
  return out;
}

/** The callers of every view waiting for `key` that `pick` keeps, oldest first. */
function waitersOf(
  views: readonly InstanceView[],
  key: string,
  now: number,
  pick: (w: WaitView, view: InstanceView) => boolean,
  inProcess: boolean,
): BoardWaiter[] {
  return views
    .flatMap((view) =>
      view.waiting.filter((w) => w.key === key && pick(w, view)).map((w) => ({ view, w })),
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
 * The server's lines of up to `LINES_MEASURED` keys (and those of `pageKeys`), and an empty line
 * for each key of `inProcess` that has none (its callers wait inside their process).
 */
export async function linesOfServer(
  source: BoardSource,
  waited: readonly string[],
  pageKeys: ReadonlySet<string>,
  inProcess: ReadonlySet<string>,
): Promise<BoardKeyLine[]> {
  const wanted = new Set(waited.slice(0, LINES_MEASURED));
  for (const key of waited) if (pageKeys.has(key)) wanted.add(key);
  for (const key of inProcess) if (wanted.size < 2 * LINES_MEASURED) wanted.add(key);
  const lines = await source.lines([...wanted], LINE_LIMIT);
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
