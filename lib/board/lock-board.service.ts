import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import type { LockService } from '../api/lock.service';
import type { BoardScan } from '../core/board-source';
import type { LockBackend } from '../core/lock-backend';
import type { LockGroupRegistry } from '../module/lock-group.registry';
import {
  BOARD_PUBLISH_FAILED,
  BOARD_RELEASE_NOT_HELD,
  BOARD_RELEASE_UNSUPPORTED,
} from './board.messages';
import {
  type BoardGroup,
  type EventFilter,
  type GroupSources,
  heldFromServer,
  heldFromViews,
  Holders,
  hotKeys,
  instancesOf,
  keysWaitedInProcess,
  lineFromServer,
  linesFromViews,
  LINE_LIMIT,
  linesOfServer,
  longestLines,
  newestEvents,
  PAGE_SIZE,
  seriesOf,
} from './board-data';
import type { BoardHeld, BoardKeyPage, BoardLine, BoardNode, BoardOverview } from './board-pages';
import { type BoardEvent, BoardRecorder } from './board-recorder';
import { type InstanceView, InstanceViews } from './instance-view';
import type { ResolvedLockBoardOptions } from './lock-board-options.interface';

/** How often instances publish while a page is open, ms (at most; `publishInterval` if less). */
const WATCHED_PUBLISH_MS = 250;
/** How long one look at the board keeps instances publishing often, ms. */
const WATCHED_FOR_MS = 3_000;
/** How long node checks are reused, ms. */
const NODES_TTL = 5_000;
/** Events read per group for a key's page. */
const KEY_EVENTS_READ = 200;

/** What the overview is asked for. */
export interface OverviewQuery {
  readonly search?: string;
  readonly group?: string;
  /** 1-based. */
  readonly page?: number;
  /** Which events to list. @default 'problems' */
  readonly events?: EventFilter;
}

/** The outcome of a force release. */
export type ReleaseOutcome = { released: true } | { released: false; reason: string };

/**
 * The board's work: publishes this instance's view where each group keeps views, and builds the
 * views a page asks for (across instances) from each group's lock server (`BoardSource`) and
 * the published views.
 * @internal
 */
export class LockBoardService {
  private readonly logger = new Logger('nest-locked:board');
  private readonly id = randomBytes(6).toString('base64url');
  readonly recorder: BoardRecorder;
  private readonly views: InstanceViews;
  private readonly groups: BoardGroup[] = [];
  private timer?: NodeJS.Timeout;
  private publishing?: Promise<void>;
  /** Groups whose last publish failed (warned once until it works again). */
  private readonly failing = new Set<string>();
  private nodes?: { at: number; value: Promise<BoardNode[]> };
  private readonly scans = new Map<string, { at: number; value: Promise<BoardScan> }>();
  /** Whether a page was open at the last publish (then publishing is faster). */
  private watched = false;
  /** When this instance last told the others a page is open. */
  private watchSent = 0;

  constructor(
    readonly options: ResolvedLockBoardOptions,
    readonly locks: LockService,
    registry: LockGroupRegistry,
  ) {
    this.recorder = new BoardRecorder(locks, options.instance);
    this.views = new InstanceViews(this.id, options.instance, locks, this.recorder);
    const add = (name: string, backend: string, client: LockBackend) =>
      this.groups.push({
        name,
        backend,
        client,
        source: client.boardSource?.(),
        inProcess: backend === 'memory',
      });
    for (const [name, { backend: client, kind }] of registry.all()) add(name, kind, client);
  }

  start(): void {
    this.recorder.start();
    const tick = () => {
      this.publishing = this.publish().finally(() => {
        const { publishInterval } = this.options;
        const next = this.watched ? Math.min(publishInterval, WATCHED_PUBLISH_MS) : publishInterval;
        if (this.timer) this.timer = setTimeout(tick, next).unref();
      });
    };
    this.timer = setTimeout(tick, 0).unref();
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.recorder.stop();
    await this.publishing;
    await Promise.all(
      this.groups.map(async (g) => {
        await g.source?.views?.withdraw(this.id).catch(() => undefined);
        await g.source?.close?.().catch(() => undefined);
      }),
    );
  }

  /** Publishes this instance's view and new events to every group that keeps views. */
  async publish(): Promise<void> {
    const { expiry, eventsKept } = this.options;
    let watched = false;
    await Promise.all(
      this.groups.map(async (g) => {
        const store = g.source?.views;
        if (!store) return;
        const events = this.recorder.takeUnpublished(g.name).map((e) => ({
          stream: e.type === 'busy' ? ('busy' as const) : ('events' as const),
          json: JSON.stringify(e),
        }));
        try {
          const view = JSON.stringify(this.view(g));
          watched = (await store.publish(this.id, view, events, expiry, eventsKept)) || watched;
          this.failing.delete(g.name);
        } catch (err) {
          if (!this.failing.has(g.name)) {
            this.failing.add(g.name);
            this.logger.warn(BOARD_PUBLISH_FAILED(g.name, (err as Error).message));
          }
        }
      }),
    );
    this.watched = watched;
  }

  /**
   * A page is open here: the instances publish every `WATCHED_PUBLISH_MS` for a while, so the
   * fence and age of young holds show sooner (one write per group every second at most).
   */
  private watch(groups: readonly BoardGroup[]): void {
    const now = Date.now();
    if (now - this.watchSent < 1_000) return;
    this.watchSent = now;
    for (const g of groups) void g.source?.views?.watch(WATCHED_FOR_MS).catch(() => undefined);
  }

  /** Everything the overview page shows. */
  async overview(query: OverviewQuery = {}): Promise<BoardOverview> {
    const now = Date.now();
    const search = query.search ?? '';
    const groups = this.groups.filter((g) => !query.group || g.name === query.group);
    this.watch(groups);
    // Independent reads go out together: the views, the events and the node checks; the scans
    // once the views name the keys (a server that keeps digests only needs the names).
    const filter = query.events ?? 'problems';
    const eventsRead = Promise.all(groups.map((g) => this.events(g, 100, filter)));
    const nodesRead = this.nodeChecks();
    for (const read of [eventsRead, nodesRead]) read.catch(() => undefined);
    const sources = await Promise.all(groups.map((g) => this.sources(g)));
    const scanned = await Promise.all(
      sources.map((s) => (s.group.source ? this.scan(s, search) : undefined)),
    );
    // Held keys of every group, sorted, then one page of them read in detail.
    const listed: Array<{ source: GroupSources; key: string }> = [];
    const scans = new Map<string, BoardScan>();
    let complete = true;
    const localRows = new Map<string, BoardHeld>();
    for (const [i, source] of sources.entries()) {
      const { group } = source;
      const scan = scanned[i];
      if (scan) {
        scans.set(group.name, scan);
        complete &&= scan.complete;
        for (const key of scan.held) listed.push({ source, key });
      } else {
        for (const row of heldFromViews(group.name, source.views, now)) {
          if (!row.key.includes(search)) continue;
          localRows.set(`${group.name}\n${row.key}`, row);
          listed.push({ source, key: row.key });
        }
      }
    }
    const pages = Math.max(1, Math.ceil(listed.length / PAGE_SIZE));
    const page = Math.min(Math.max(1, query.page ?? 1), pages);
    const shown = listed.slice((page - 1) * PAGE_SIZE, page * PAGE_SIZE);
    const rows: BoardHeld[] = [];
    const lines: BoardLine[] = [];
    for (const source of sources) {
      const { group, serverNow } = source;
      let { views } = source;
      const keys = shown.filter((s) => s.source === source).map((s) => s.key);
      const server = group.source;
      if (server) {
        const inProcess = server.everyCaller
          ? []
          : [...keysWaitedInProcess(views)].filter((k) => k.includes(search));
        const [held, stored] = await Promise.all([
          server.held(keys),
          server.queued
            ? linesOfServer(
                server,
                scans.get(group.name)!.waited,
                new Set(keys),
                new Set(inProcess),
              )
            : [],
        ]);
        views = this.withOwnView(group, views);
        const holders = new Holders(views);
        for (const h of held) rows.push(heldFromServer(group.name, h, holders, serverNow, now));
        const times = { serverNow, now };
        lines.push(
          ...stored.map((l) =>
            lineFromServer(group.name, l, holders, views, times, server.everyCaller),
          ),
        );
      } else {
        for (const key of keys) rows.push(localRows.get(`${group.name}\n${key}`)!);
      }
      if (!server?.queued) {
        const all = linesFromViews(group.name, views, now, group.inProcess);
        lines.push(...all.filter((l) => l.key.includes(search)));
      }
    }
    const events = await eventsRead;
    return {
      now,
      self: this.options.instance,
      actions: this.options.actions,
      groups: this.groups.map((g) => ({ name: g.name, backend: g.backend })),
      legends: this.legends(),
      instances: instancesOf(sources, this.id, now),
      held: { total: listed.length, page, pages, complete, rows },
      lines: longestLines(lines, new Set(shown.map((s) => `${s.source.group.name}\n${s.key}`))),
      hot: {
        series: seriesOf(
          sources.flatMap((s) => s.views.map((v) => v.rates.total)),
          now,
        ),
        keys: hotKeys(sources, now),
      },
      events: newestEvents(events, filter),
      nodes: await nodesRead,
    };
  }

  /** Everything about one key. */
  async keyPage(groupName: string, key: string): Promise<BoardKeyPage | undefined> {
    const group = this.groups.find((g) => g.name === groupName);
    if (!group) return undefined;
    this.watch([group]);
    const now = Date.now();
    const all = await this.events(group, KEY_EVENTS_READ, 'all');
    const sources = await this.sources(group);
    const { serverNow } = sources;
    let { views } = sources;
    let held: BoardHeld[];
    let line: BoardLine | null = null;
    const server = group.source;
    if (server) {
      const found = await server.held([key]);
      views = this.withOwnView(group, views);
      const holders = new Holders(views);
      held = found.map((h) => heldFromServer(group.name, h, holders, serverNow, now));
      if (server.queued) {
        const [stored = { key, length: 0, waiters: [] }] = await server.lines([key], LINE_LIMIT);
        const times = { serverNow, now };
        const read = lineFromServer(group.name, stored, holders, views, times, server.everyCaller);
        if (read.length > 0) line = read;
      }
    } else {
      held = heldFromViews(group.name, views, now).filter((r) => r.key === key);
    }
    if (!server?.queued) {
      const all = linesFromViews(group.name, views, now, group.inProcess);
      line = all.find((l) => l.key === key) ?? null;
    }
    return {
      now,
      group: group.name,
      key,
      actions: this.options.actions,
      held,
      line,
      series: seriesOf(
        views.map((v) => v.rates.keys[key]),
        now,
      ),
      events: newestEvents([all], 'problems', key),
      busy: newestEvents([all], 'busy', key, 10),
    };
  }

  /**
   * Force release of `key` through its backend's own mechanism, recorded as a `forced` event
   * naming `who`; refused with a sentence where the backend cannot do it safely.
   */
  async forceRelease(groupName: string, key: string, who: string): Promise<ReleaseOutcome> {
    const group = this.groups.find((g) => g.name === groupName);
    if (!group) return { released: false, reason: BOARD_RELEASE_NOT_HELD(key) };
    const server = group.source;
    if (!server?.forceRelease) {
      return { released: false, reason: BOARD_RELEASE_UNSUPPORTED(group.name, group.backend) };
    }
    const [held] = await server.held([key]);
    if (!held || held.mode !== 'exclusive' || held.holders.length !== 1) {
      return { released: false, reason: BOARD_RELEASE_NOT_HELD(key) };
    }
    const [holder] = held.holders;
    const instance = new Holders((await this.sources(group)).views).holderOf(holder, key);
    const freed = await server.forceRelease(key, holder);
    if (typeof freed === 'string') return { released: false, reason: freed };
    if (!freed) return { released: false, reason: BOARD_RELEASE_NOT_HELD(key) };
    this.recorder.add('forced', group.name, [key], `by ${who}, held by ${instance ?? 'unknown'}`);
    this.logger.warn(`lock board: ${who} force-released "${key}" (group ${group.name})`);
    await this.publish();
    return { released: true };
  }

  /** What the page's legend says per group of the columns its server cannot tell. */
  private legends(): Array<{ group: string; text: string }> {
    return this.groups.flatMap((g) =>
      g.source?.legend ? [{ group: g.name, text: g.source.legend }] : [],
    );
  }

  /**
   * `views` with this instance's own view (first) taken again: after a read of the server, so
   * a hold of this instance the server shows is in it, with its fence and age.
   */
  private withOwnView(group: BoardGroup, views: readonly InstanceView[]): InstanceView[] {
    return [this.view(group), ...views.slice(1)];
  }

  /** This instance's view of a group, fresh. */
  private view(g: BoardGroup): InstanceView {
    return this.views.of(g.name, g.backend, g.client, g.source?.owner());
  }

  /** The views of a group's instances (this one's fresh), and the clock its times are on. */
  private async sources(group: BoardGroup): Promise<GroupSources> {
    const mine = this.view(group);
    const server = group.source;
    if (!server) return { group, views: [mine], serverNow: Date.now() };
    const [published, serverNow] = await Promise.all([
      server.views?.views() ?? [],
      server.serverTime(),
    ]);
    const others = published
      .map((json) => JSON.parse(json) as InstanceView)
      .filter((v) => v.id !== this.id);
    return { group, views: [mine, ...others], serverNow };
  }

  private async events(group: BoardGroup, count: number, filter: EventFilter) {
    const store = group.source?.views;
    if (!store?.events) return this.recorder.events().filter((e) => e.group === group.name);
    const streams: Array<'events' | 'busy'> =
      filter === 'busy' ? ['busy'] : filter === 'all' ? ['events', 'busy'] : ['events'];
    return (await store.events(count, streams)).map((json) => JSON.parse(json) as BoardEvent);
  }

  private scan({ group, views }: GroupSources, search: string): Promise<BoardScan> {
    const id = `${group.name}\n${search}`;
    const cached = this.scans.get(id);
    // Reused within one refresh: many open pages cost one scan, each refresh sees new keys.
    if (cached && Date.now() - cached.at < this.options.refreshInterval * 0.8) return cached.value;
    if (this.scans.size > 100) this.scans.clear();
    const named = new Set<string>();
    for (const v of views) {
      for (const h of v.holds) named.add(h.key);
      for (const w of v.waiting) named.add(w.key);
    }
    const value = group.source!.scan(search, this.options.maxScan, [...named]);
    value.catch(() => this.scans.delete(id));
    this.scans.set(id, { at: Date.now(), value });
    return value;
  }

  /** Every node of every group: reachability, latency, role, settings at risk (cached a while). */
  private nodeChecks(): Promise<BoardNode[]> {
    if (this.nodes && Date.now() - this.nodes.at < NODES_TTL) return this.nodes.value;
    const timeout = 1_000;
    const value = Promise.all(
      this.groups.map(async ({ name: group, backend, client, source }) => {
        const nodes = (await source?.nodes?.(timeout)) ??
          (await client.health?.(timeout))?.nodes ?? [
            { node: 'in process', status: 'up' as const },
          ];
        return nodes.map((n): BoardNode => ({ group, backend, ...n }));
      }),
    ).then((all) => all.flat());
    this.nodes = { at: Date.now(), value };
    return value;
  }
}
