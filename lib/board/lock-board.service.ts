import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import type { LockService } from '../api/lock.service';
import type { LockClientRegistry } from '../module/lock-client.registry';
import { evictionPolicy } from '../redis/eviction-policy';
import { KeySpace } from '../redis/key-space';
import { pingNode } from '../redis/node-ping';
import { isCluster } from '../redis/redis-node';
import {
  BOARD_PUBLISH_FAILED,
  BOARD_RELEASE_NOT_HELD,
  BOARD_RELEASE_UNSUPPORTED,
} from './board.messages';
import {
  type BoardGroup,
  type BoardHeld,
  type BoardKeyPage,
  type BoardLine,
  type BoardNode,
  type BoardOverview,
  type EventFilter,
  type GroupSources,
  heldFromRedis,
  heldFromViews,
  Holders,
  hotKeys,
  instancesOf,
  keysWaitedInProcess,
  lineFromRedis,
  linesFromViews,
  linesOfRedis,
  longestLines,
  newestEvents,
  PAGE_SIZE,
  seriesOf,
} from './board-data';
import { BoardRecorder } from './board-recorder';
import { InstanceViews } from './instance-view';
import type { ResolvedLockBoardOptions } from './lock-board-options.interface';
import { RedisBoardStore, type ScanResult } from './redis-board-store';

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
 * The board's work: publishes this instance's view to every Redis group, and builds the views
 * a page asks for (across instances) from the protocol's keys and the published views.
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
  private readonly scans = new Map<string, { at: number; value: Promise<ScanResult> }>();
  /** Whether a page was open at the last publish (then publishing is faster). */
  private watched = false;
  /** When this instance last told the others a page is open. */
  private watchSent = 0;

  constructor(
    readonly options: ResolvedLockBoardOptions,
    readonly locks: LockService,
    private readonly registry: LockClientRegistry,
    keyPrefix: string,
  ) {
    this.recorder = new BoardRecorder(locks, options.instance);
    this.views = new InstanceViews(this.id, options.instance, locks, this.recorder);
    for (const [name, client] of registry.clients()) {
      const node = client.nodes[0];
      const space = new KeySpace(keyPrefix, client.nodes.some(isCluster));
      this.groups.push({
        name,
        backend: 'redis',
        client,
        store: new RedisBoardStore(name, node, space),
        queued: client.nodes.length === 1 && !isCluster(node),
        inProcess: false,
        tokenPrefix: client.tokenPrefix,
      });
    }
    for (const [name, { client, kind }] of registry.backends()) {
      this.groups.push({
        name,
        backend: kind,
        client,
        queued: false,
        inProcess: kind === 'memory',
      });
    }
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
    await Promise.all(this.groups.map((g) => g.store?.withdraw(this.id).catch(() => undefined)));
  }

  /** Publishes this instance's view and new events to every Redis group. */
  async publish(): Promise<void> {
    const { expiry, eventsKept } = this.options;
    let watched = false;
    await Promise.all(
      this.groups.map(async (g) => {
        if (!g.store) return;
        const events = this.recorder.takeUnpublished(g.name);
        try {
          watched = (await g.store.publish(this.view(g), events, expiry, eventsKept)) || watched;
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
    for (const g of groups) void g.store?.watch(WATCHED_FOR_MS).catch(() => undefined);
  }

  /** Everything the overview page shows. */
  async overview(query: OverviewQuery = {}): Promise<BoardOverview> {
    const now = Date.now();
    const search = query.search ?? '';
    const groups = this.groups.filter((g) => !query.group || g.name === query.group);
    this.watch(groups);
    // Independent reads go out together: the views, the scans, the events and the node checks.
    const filter = query.events ?? 'problems';
    const eventsRead = Promise.all(groups.map((g) => this.events(g, 100, filter)));
    const nodesRead = this.nodeChecks();
    const scansRead = Promise.all(groups.map((g) => (g.store ? this.scan(g, search) : undefined)));
    for (const read of [eventsRead, nodesRead, scansRead]) read.catch(() => undefined);
    const sources = await Promise.all(groups.map((g) => this.sources(g)));
    const scanned = await scansRead;
    // Held keys of every group, sorted, then one page of them read in detail.
    const listed: Array<{ source: GroupSources; key: string }> = [];
    const scans = new Map<string, ScanResult>();
    let complete = true;
    const localRows = new Map<string, BoardHeld>();
    for (const [i, source] of sources.entries()) {
      const { group } = source;
      const scan = scanned[i];
      if (scan) {
        scans.set(group.name, scan);
        complete &&= scan.complete;
        for (const key of scan.locks) listed.push({ source, key });
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
      const { group, views, serverNow } = source;
      const keys = shown.filter((s) => s.source === source).map((s) => s.key);
      if (group.store) {
        const holders = new Holders(views);
        const inProcess = [...keysWaitedInProcess(views)].filter((k) => k.includes(search));
        const [locks, stored] = await Promise.all([
          group.store.locks(keys),
          group.queued
            ? linesOfRedis(group.store, scans.get(group.name)!, new Set(keys), new Set(inProcess))
            : [],
        ]);
        for (const lock of locks) {
          const row = heldFromRedis(group.name, lock, holders, serverNow, now);
          if (row) rows.push(row);
        }
        lines.push(
          ...stored.map((l) => lineFromRedis(group.name, l, holders, views, serverNow, now)),
        );
      } else {
        for (const key of keys) rows.push(localRows.get(`${group.name}\n${key}`)!);
      }
      if (!group.queued) {
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
    const { views, serverNow } = await this.sources(group);
    let held: BoardHeld[];
    let line: BoardLine | null = null;
    if (group.store) {
      const holders = new Holders(views);
      const [lock] = await group.store.locks([key]);
      const row = heldFromRedis(group.name, lock, holders, serverNow, now);
      held = row ? [row] : [];
      if (group.queued) {
        const [stored = { key, length: 0, waiters: [] }] = await group.store.lines([key]);
        const found = lineFromRedis(group.name, stored, holders, views, serverNow, now);
        if (found.length > 0) line = found;
      }
    } else {
      held = heldFromViews(group.name, views, now).filter((r) => r.key === key);
    }
    if (!group.queued) {
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

  /** Force release of `key` (Redis groups), recorded as a `forced` event naming `who`. */
  async forceRelease(groupName: string, key: string, who: string): Promise<ReleaseOutcome> {
    const group = this.groups.find((g) => g.name === groupName);
    if (!group) return { released: false, reason: BOARD_RELEASE_NOT_HELD(key) };
    if (!group.store) {
      return { released: false, reason: BOARD_RELEASE_UNSUPPORTED(group.name, group.backend) };
    }
    const [lock] = await group.store.locks([key]);
    if (lock.value === null || lock.value.startsWith('\0')) {
      return { released: false, reason: BOARD_RELEASE_NOT_HELD(key) };
    }
    const holder = new Holders((await this.sources(group)).views).instance(lock.value);
    if (!(await group.store.forceRelease(key, lock.value))) {
      return { released: false, reason: BOARD_RELEASE_NOT_HELD(key) };
    }
    this.recorder.add('forced', group.name, [key], `by ${who}, held by ${holder ?? 'unknown'}`);
    this.logger.warn(`lock board: ${who} force-released "${key}" (group ${group.name})`);
    await this.publish();
    return { released: true };
  }

  /** This instance's view of a group, fresh. */
  private view(g: BoardGroup) {
    return this.views.of(g.name, g.backend, g.client, g.tokenPrefix);
  }

  /** The views of a group's instances (this one's fresh), and the clock its times are on. */
  private async sources(group: BoardGroup): Promise<GroupSources> {
    const mine = this.view(group);
    if (!group.store) return { group, views: [mine], serverNow: Date.now() };
    const [published, serverNow] = await Promise.all([
      group.store.instances(),
      group.store.serverTime(),
    ]);
    return { group, views: [mine, ...published.filter((v) => v.id !== this.id)], serverNow };
  }

  private async events(group: BoardGroup, count: number, filter: EventFilter) {
    if (!group.store) return this.recorder.events().filter((e) => e.group === group.name);
    const streams: Array<'events' | 'busy'> =
      filter === 'busy' ? ['busy'] : filter === 'all' ? ['events', 'busy'] : ['events'];
    return group.store.events(count, streams);
  }

  private scan(group: BoardGroup, search: string): Promise<ScanResult> {
    const id = `${group.name}\n${search}`;
    const cached = this.scans.get(id);
    // Reused within one refresh: many open pages cost one scan, each refresh sees new keys.
    if (cached && Date.now() - cached.at < this.options.refreshInterval * 0.8) return cached.value;
    if (this.scans.size > 100) this.scans.clear();
    const value = group.store!.scan(search, this.options.maxScan);
    value.catch(() => this.scans.delete(id));
    this.scans.set(id, { at: Date.now(), value });
    return value;
  }

  /** Every node of every group: reachability, latency, role, eviction risk (cached a while). */
  private nodeChecks(): Promise<BoardNode[]> {
    if (this.nodes && Date.now() - this.nodes.at < NODES_TTL) return this.nodes.value;
    const timeout = 1_000;
    const value = Promise.all([
      ...[...this.registry.clients()].flatMap(([group, client]) =>
        client.nodes.map(async (node): Promise<BoardNode> => {
          const health = await pingNode(node, timeout);
          if (health.status === 'down' || isCluster(node)) {
            return { group, backend: 'redis', ...health };
          }
          const [role, policy] = await Promise.all([roleOf(node), evictionPolicy(node)]);
          const warning = policy && `maxmemory-policy ${policy}: held locks may be evicted`;
          return { group, backend: 'redis', ...health, role, warning };
        }),
      ),
      ...[...this.registry.backends()].map(async ([group, { client, kind }]) => {
        const health = await client.health?.(timeout);
        return (health?.nodes ?? [{ node: 'in process', status: 'up' as const }]).map(
          (n): BoardNode => ({ group, backend: kind, ...n }),
        );
      }),
    ]).then((all) => all.flat());
    this.nodes = { at: Date.now(), value };
    return value;
  }
}

/** `master` or `replica` (INFO replication), undefined when not told. */
async function roleOf(node: {
  info(section: string): Promise<string>;
}): Promise<string | undefined> {
  try {
    const info = await node.info('replication');
    return /^role:(\w+)/m.exec(info)?.[1];
  } catch {
    return undefined;
  }
}
