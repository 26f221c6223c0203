/// <reference lib="dom" />
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Page } from 'playwright-core';
import type { BoardOverview } from 'nest-locked/board';
import type { BackendSpec } from '../fixtures/backend-spec';
import type { BoardAppConfig, BoardAppLine } from '../fixtures/board-app';
import { uniquePrefix } from '../support/lock-app';
import { type MariadbServerHandle, startMariadb } from '../support/mariadb-server';
import { startPostgres } from '../support/postgres-server';
import { sendCommand, useRedis } from '../support/redis-server';
import { startEtcdCluster } from '../support/etcd-server';
import { killWorkers, spawnWorker, type Worker } from '../support/workers';
import { fourLetterWord, startZooKeeper } from '../support/zookeeper-server';
import { boardOverview, readUntil } from './support/board-api';
import { boardBrowser } from './support/board-browser';

/**
 * The board on every backend, in a browser: three app processes (two web instances and a
 * worker without HTTP) hold and wait on keys; the page of one instance shows every holder with
 * its instance and every waiter in order, follows a release without a reload, and drops the
 * rows of a killed instance once its session is over. One server per backend, one after the
 * other; one browser for all. Screenshots go to BOARD_E2E_OUTPUT; each backend's refresh cost
 * (server requests and ms of one overview) is printed.
 */
jest.setTimeout(150_000);

const AUTH = { username: 'ops', password: 'locks' };
const HEADER = `Basic ${Buffer.from('ops:locks').toString('base64')}`;
const artifacts = process.env.BOARD_E2E_OUTPUT ?? path.join(os.tmpdir(), 'nest-locked-board-e2e');

/** A backend's server for this file: the spec the apps use, a request counter, and its end. */
interface BackendUnderTest {
  readonly spec: BackendSpec;
  /**
   * Requests the server has answered so far (all clients), to cost a refresh; or those the
   * page's instance sent (`app`), where the server counts late.
   */
  requests(app: App): Promise<number>;
  /** false where the server lists no lock a session waits for (MariaDB without P_S). */
  readonly lines?: false;
  /** A force release's refusal, where the server cannot tell what else a session holds. */
  readonly refusal?: RegExp;
  /** The refusal of a force release of one key of a hold of two (one session holds both). */
  readonly sessionRefusal?: RegExp;
  stop(): Promise<void>;
}

type App = ReturnType<typeof startApp>;

const backends: Record<string, () => Promise<BackendUnderTest>> = {
  redis: async () => {
    const redis = await useRedis();
    return {
      spec: { kind: 'redis', clients: [redis.url] },
      requests: async () => {
        const info = String(await sendCommand(redis.host, redis.port, ['INFO', 'stats'], 2_000));
        return Number(/total_commands_processed:(\d+)/.exec(info)?.[1]);
      },
      stop: () => redis.stop(),
    };
  },
  etcd: async () => {
    const etcd = await startEtcdCluster(1);
    return {
      spec: { kind: 'etcd', options: { hosts: etcd.hosts, sessionTtl: 3_000 } },
      requests: async () => {
        const text = await (await fetch(`http://${etcd.hosts[0]}/metrics`)).text();
        return [...text.matchAll(/^grpc_server_started_total\{[^}]*\} (\d+)/gm)].reduce(
          (sum, m) => sum + Number(m[1]),
          0,
        );
      },
      stop: () => etcd.stop(),
    };
  },
  zookeeper: async () => {
    const zk = await startZooKeeper();
    const port = zk.members[0].port;
    return {
      spec: {
        kind: 'zookeeper',
        options: { connectString: zk.connectString, sessionTimeout: 3_000 },
      },
      requests: async () =>
        Number(/Received: (\d+)/.exec(await fourLetterWord(port, 'srvr', 2_000))?.[1]),
      stop: () => zk.stop(),
    };
  },
  postgres: async () => {
    const pg = await startPostgres();
    return {
      spec: { kind: 'postgres', options: { ...pg.config } },
      sessionRefusal: /holds 1 other advisory lock/,
      requests: (app) => app.count(),
      stop: () => pg.stop(),
    };
  },
  // MariaDB with performance_schema (and its metadata-lock instrument) on: holders and lines.
  mysql: async () => {
    const db = await startMariadb({ performanceSchema: true });
    await db.sql("GRANT SELECT ON performance_schema.* TO 'locks'@'%'");
    return mysqlUnderTest(db);
  },
  // MariaDB as Debian ships it (performance_schema off): holders only.
  'mysql-plain': async () => ({
    ...mysqlUnderTest(await startMariadb()),
    lines: false,
    refusal: /does not list the other locks a connection holds/,
  }),
};

function mysqlUnderTest(db: MariadbServerHandle): BackendUnderTest {
  return {
    spec: { kind: 'mysql', options: { ...db.config } },
    requests: async () => {
      const [row] = await db.sql<{ Value: string }>("SHOW GLOBAL STATUS LIKE 'Questions'");
      return Number(row.Value);
    },
    stop: () => db.stop(),
  };
}

const only = process.env.BOARD_BACKENDS?.split(',');
const chosen = Object.keys(backends).filter((b) => !only || only.includes(b));

/**
 * The refresh cost is measured with the backends one after the other (BOARD_REFRESH_COST=1);
 * otherwise they run at the same time, which keeps this file short.
 */
const measure = process.env.BOARD_REFRESH_COST === '1';

/** Started once, on first use: the browser, and each backend's server. */
let browser: ReturnType<typeof boardBrowser> | undefined;
const servers = new Map<string, Promise<BackendUnderTest>>();
const browserOnce = () => (browser ??= boardBrowser(AUTH));
function serverOf(name: string): Promise<BackendUnderTest> {
  let server = servers.get(name);
  if (!server) servers.set(name, (server = backends[name]()));
  return server;
}

beforeAll(() => fs.mkdirSync(artifacts, { recursive: true }));

afterAll(async () => {
  await killWorkers();
  await (await browser?.catch(() => undefined))?.close();
  await Promise.all(
    [...servers.values()].map((s) =>
      s.then(
        (b) => b.stop(),
        () => undefined,
      ),
    ),
  );
});

/** One app process of the board, over `spec`. */
function startApp(spec: BackendSpec, keyPrefix: string, instance: string, http: boolean) {
  const config: BoardAppConfig = { backend: spec, keyPrefix, instance, http, timeoutMs: 120_000 };
  const worker = spawnWorker<BoardAppConfig, BoardAppLine>(config, 'board-app');
  let seq = 0;
  return {
    worker,
    /** Takes `key` (waiting for it); resolves with its id once sent. */
    hold(key: string | string[]): { id: string; held: Promise<void> } {
      const id = `${instance}-${++seq}`;
      const held = new Promise<void>((resolve, reject) =>
        worker.onLine((l) => {
          if (l.type === 'held' && l.id === id) resolve();
          if (l.type === 'error' && l.id === id) reject(new Error(`${id}: ${l.message}`));
        }),
      );
      held.catch(() => undefined);
      worker.send(JSON.stringify({ op: 'hold', id, key }));
      return { id, held };
    },
    release(id: string) {
      worker.send(JSON.stringify({ op: 'release', id }));
    },
    /** Queries this process sent (PostgreSQL only). */
    count(): Promise<number> {
      const counted = new Promise<number>((resolve) =>
        worker.onLine((l) => l.type === 'count' && resolve(l.queries)),
      );
      worker.send(JSON.stringify({ op: 'count', id: '' }));
      return counted;
    },
  };
}

async function urlOf(worker: Worker<BoardAppLine>): Promise<string> {
  await worker.ready;
  const ready = worker.lines.find((l) => l.type === 'ready') as { url?: string };
  return ready.url!;
}

/** The held rows of the page, as `key → instance`. */
async function heldOnPage(page: Page): Promise<Record<string, string>> {
  const rows = await page
    .locator('#held tbody tr')
    .evaluateAll((trs) =>
      trs.map((tr) => Array.from(tr.querySelectorAll('td'), (td) => td.textContent ?? '')),
    );
  return Object.fromEntries(rows.map((cells) => [cells[0], cells[2]]));
}

/** Waits until the page's held rows pass `check` (the page updates itself: no reload). */
async function pageShows(
  page: Page,
  what: string,
  check: (held: Record<string, string>) => boolean,
  ms = 20_000,
): Promise<void> {
  await readUntil(what, () => heldOnPage(page), check, ms);
}

const each = measure ? it.each(chosen) : it.concurrent.each(chosen);

each(
  'on %s: every instance’s holds and waiters in order, live, a killed instance gone, force release',
  async (name) => {
    const backend = await serverOf(name);
    const { context } = await browserOnce();
    const prefix = uniquePrefix(`board-${name}`);
    const web1 = startApp(backend.spec, prefix, 'web-1', true);
    const web2 = startApp(backend.spec, prefix, 'web-2', true);
    const worker = startApp(backend.spec, prefix, 'worker', false);
    const apps = [web1, web2, worker];
    try {
      const url = await urlOf(web1.worker);
      await Promise.all([web2.worker.ready, worker.worker.ready]);
      const overview = () => boardOverview(url, HEADER);

      // Each instance holds a key; web-2 then web-1 wait for the worker's (where the server
      // lists waiters: else web-2 alone, whose wait the page cannot show).
      const held = worker.hold('order:1');
      await held.held;
      await Promise.all([web1.hold('order:2').held, web2.hold('order:3').held]);
      const second = web2.hold('order:1');
      const lineOf = (o: BoardOverview) => o.lines.find((l) => l.key === 'order:1');
      const inLine = (o: BoardOverview) =>
        (lineOf(o)?.waiters ?? []).filter((w) => !w.inProcess).map((w) => w.instance);
      let third: { held: Promise<void> } | undefined;
      if (backend.lines !== false) {
        await readUntil('web-2 in line', overview, (o) => inLine(o).join() === 'web-2');
        third = web1.hold('order:1');
        const o = await readUntil(
          'both in line',
          overview,
          (o) => inLine(o).join() === 'web-2,web-1',
        );
        expect(lineOf(o)).toMatchObject({ length: 2, complete: true });
      }

      const page = await context.newPage();
      await page.setViewportSize({ width: 1400, height: 1100 });
      await page.goto(`${url}/locks/`);
      await pageShows(
        page,
        'every holder with its instance',
        (h) => h['order:1'] === 'worker' && h['order:2'] === 'web-1' && h['order:3'] === 'web-2',
      );
      if (backend.lines !== false) {
        const line = page.locator('#lines ol.line').first();
        await line.locator('li', { hasText: 'web-1' }).waitFor({ timeout: 10_000 });
        const order = await line.locator('li strong').allInnerTexts();
        expect(order).toEqual(['web-2', 'web-1']);
      } else {
        // The legend says why the lines are missing.
        await page.locator('#legend', { hasText: 'waiting lines are not shown' }).waitFor();
      }
      await page.screenshot({ path: path.join(artifacts, `board-${name}.png`), fullPage: true });

      if (measure) await refreshCost(name, backend, web1, overview);

      // The worker releases: web-2 holds next, the page follows without a reload.
      worker.release(held.id);
      await second.held;
      await pageShows(page, 'web-2 holds after the release', (h) => h['order:1'] === 'web-2');

      // web-2 dies: its holds go with its session; web-1 takes order:1 (where it waits).
      web2.worker.kill();
      await third?.held;
      await pageShows(
        page,
        "the killed instance's rows gone",
        (h) => h['order:1'] === (third ? 'web-1' : undefined) && h['order:3'] === undefined,
        30_000,
      );

      // Force release of web-1's order:2, confirmed, through the backend's own mechanism.
      const res = await fetch(
        `${url}/locks/api/release?group=default&key=order:2&confirm=order:2`,
        {
          method: 'POST',
          headers: { authorization: HEADER, 'x-lock-board': 'release' },
        },
      );
      const outcome = (await res.json()) as { released: boolean; reason?: string };
      if (backend.refusal) {
        expect(outcome).toMatchObject({
          released: false,
          reason: expect.stringMatching(backend.refusal),
        });
      } else {
        expect(outcome).toEqual({ released: true });
        await pageShows(page, 'order:2 released by force', (h) => h['order:2'] === undefined);
        const audited = await overview();
        expect(audited.events.find((e) => e.type === 'forced')).toMatchObject({
          key: 'order:2',
          detail: expect.stringMatching(/^by ops, held by web-1/),
        });
      }
      if (backend.sessionRefusal) {
        // One session holds both keys: ending it would free the other too.
        await web1.hold(['order:4', 'order:5']).held;
        await readUntil('order:4 held', overview, (o) =>
          o.held.rows.some((r) => r.key === 'order:4'),
        );
        const refused = await fetch(
          `${url}/locks/api/release?group=default&key=order:4&confirm=order:4`,
          { method: 'POST', headers: { authorization: HEADER, 'x-lock-board': 'release' } },
        );
        expect(refused.status).toBe(409);
        expect(await refused.json()).toMatchObject({
          reason: expect.stringMatching(backend.sessionRefusal),
        });
      }
      await page.close();
    } finally {
      for (const app of apps) app.worker.kill();
    }
  },
);

/**
 * The cost of one refresh: requests the server answered (or the page's instance sent) and ms,
 * over ten in a row, less what the instances ask meanwhile (counted over a second before).
 */
async function refreshCost(
  name: string,
  backend: BackendUnderTest,
  web1: App,
  overview: () => Promise<BoardOverview>,
): Promise<void> {
  const before = await backend.requests(web1);
  await new Promise((r) => setTimeout(r, 1_000));
  const idle = (await backend.requests(web1)) - before;
  const t0 = Date.now();
  const from = await backend.requests(web1);
  for (let i = 0; i < 10; i++) await overview();
  const spent = Date.now() - t0;
  const busy = (await backend.requests(web1)) - from;
  const perRefresh = (busy - (idle * spent) / 1_000) / 10;
  process.stdout.write(
    `board refresh on ${name}: ${(spent / 10).toFixed(1)} ms, ~${perRefresh.toFixed(1)} server requests (${busy} in ${spent} ms for 10; ${idle} a second without)\n`,
  );
}
