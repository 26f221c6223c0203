/// <reference lib="dom" />
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { useRedis, type RedisServerHandle } from '../support/redis-server';
import { boardOverview, readUntil } from './support/board-api';
import { boardBrowser } from './support/board-browser';
import { type SampleCluster, startSampleCluster, tempDir } from './support/sample-app';

/**
 * The lock board in a real browser (Debian's chromium, driven by playwright-core; nothing is
 * downloaded) over three sample instances as separate processes.
 */
jest.setTimeout(120_000);

const AUTH = { username: 'ops', password: 'locks' };
const HEADER = `Basic ${Buffer.from('ops:locks').toString('base64')}`;
/** Each purchase holds product:<id> for one simulated database round trip. */
const HOLD_MS = 3_000;
const artifacts = process.env.BOARD_E2E_OUTPUT ?? path.join(os.tmpdir(), 'nest-locked-board-e2e');

let redis: RedisServerHandle;
let cluster: SampleCluster;
let context: BrowserContext;
let browser: Awaited<ReturnType<typeof boardBrowser>>;
let data: { path: string; remove: () => void };

beforeAll(async () => {
  redis = await useRedis();
  data = tempDir('board-e2e');
  cluster = await startSampleCluster({
    instances: 3,
    redisUrls: [redis.url],
    dbPath: path.join(data.path, 'shop.sqlite'),
    latencyMs: HOLD_MS,
    lockWaitMs: 30_000,
  });
  browser = await boardBrowser(AUTH);
  context = browser.context;
});

afterAll(async () => {
  await browser?.close();
  await cluster?.stop();
  await redis?.stop();
  data?.remove();
});

const post = (url: string, body: unknown = {}) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

const overview = (url: string) => boardOverview(url, HEADER);
const until = readUntil;

const heldRow = (page: Page) => page.locator('#held tbody tr', { hasText: 'product:1' });

describe('lock board in a browser', () => {
  it('shows the holder and its line live, a lost lease, refuses without credentials, passes axe', async () => {
    const [app1, app2, app3] = cluster.instances;
    const product = (await (await post(`${app1.url}/products`, { stock: 100 })).json()) as {
      id: number;
    };
    expect(product.id).toBe(1);

    // Without credentials: refused, page and data alike.
    expect((await fetch(`${app1.url}/locks/`)).status).toBe(401);
    expect((await fetch(`${app1.url}/locks/api/overview`)).status).toBe(401);

    const page = await context.newPage();
    await page.goto(`${app1.url}/locks`);
    await page.getByRole('heading', { name: 'Held locks' }).waitFor();

    // app-1 holds product:1, then app-2 and app-3 queue for it, in that order.
    const purchases = [post(`${app1.url}/products/1/purchase`)];
    await until(
      'app-1 holds',
      () => overview(app1.url),
      (o) => o.held.rows.some((r) => r.key === 'product:1' && r.instance === 'app-1'),
    );
    purchases.push(post(`${app2.url}/products/1/purchase`));
    await until(
      'app-2 waits',
      () => overview(app1.url),
      (o) => o.lines.some((l) => l.key === 'product:1' && l.length === 1),
    );
    purchases.push(post(`${app3.url}/products/1/purchase`));

    const row = heldRow(page);
    await row.filter({ hasText: 'app-1' }).waitFor({ timeout: 10_000 });
    const cells = await row.locator('td').allInnerTexts();
    expect(cells[2]).toBe('app-1');
    expect(cells[3]).toMatch(/^\d+$/); // the fence
    const line = page.locator('#lines ol.line').first();
    await line.locator('li').nth(1).waitFor({ timeout: 10_000 });
    const waiters = await line.locator('li strong').allInnerTexts();
    expect(waiters).toEqual(['app-2', 'app-3']);

    // app-1 releases (its purchase answers): the page shows app-2 holding within 1 s.
    const first = await purchases[0];
    const releasedAt = Date.now();
    expect(first.status).toBe(201);
    // Checked at every frame: a locator's wait polls every 500 ms after its first tries.
    await page.waitForFunction(
      () =>
        Array.from(document.querySelectorAll('#held tbody tr')).some(
          (tr) => tr.textContent!.includes('product:1') && tr.textContent!.includes('app-2'),
        ),
      undefined,
      { polling: 'raf', timeout: 5_000 },
    );
    const updatedIn = Date.now() - releasedAt;
    expect(updatedIn).toBeLessThanOrEqual(1_000);
    await Promise.all(purchases);

    // A holder stopped past its 1 s lease: the lost lease shows as an event once it resumes.
    const build = post(`${app3.url}/reports/r1`, { durationMs: 4_000 });
    await until(
      'app-3 holds report:r1',
      () => overview(app1.url),
      (o) => o.held.rows.some((r) => r.key === 'report:r1'),
    );
    process.kill(app3.pid, 'SIGSTOP');
    try {
      await until(
        'the lease runs out',
        () => overview(app1.url),
        (o) => o.held.rows.every((r) => r.key !== 'report:r1'),
      );
    } finally {
      process.kill(app3.pid, 'SIGCONT');
    }
    await build;
    const lost = page.locator('#events tbody tr', { hasText: 'report:r1' });
    await lost.first().waitFor({ timeout: 10_000 });
    expect(await lost.first().innerText()).toMatch(/lost|expired/);
    expect(await lost.first().innerText()).toContain('app-3');

    // Keyboard: Tab reaches a key's link, Enter opens its page.
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Skip to content');
    let onKeyLink = false;
    for (let i = 0; i < 40 && !onKeyLink; i++) {
      await page.keyboard.press('Tab');
      onKeyLink = await page.evaluate(
        () => document.activeElement?.getAttribute('href')?.startsWith('#/key/') ?? false,
      );
    }
    expect(onKeyLink).toBe(true);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Waiting line' }).waitFor();

    // Accessibility: axe-core on both views, no serious or critical violation.
    for (const hash of ['#/key/default/product%3A1', '#/']) {
      await page.evaluate((h) => (location.hash = h), hash);
      await page.locator('section.panel').first().waitFor();
      await page.addScriptTag({ path: require.resolve('axe-core/axe.min.js') });
      const result = await page.evaluate(() =>
        (
          window as unknown as {
            axe: { run(): Promise<{ violations: Array<{ id: string; impact: string }> }> };
          }
        ).axe.run(),
      );
      const serious = result.violations.filter(
        (v) => v.impact === 'serious' || v.impact === 'critical',
      );
      expect(serious.map((v) => v.id)).toEqual([]);
    }

    fs.mkdirSync(artifacts, { recursive: true });
    const shot = path.join(artifacts, 'board.png');
    await page.setViewportSize({ width: 1400, height: 1100 });
    await page.screenshot({ path: shot, fullPage: true });
    process.stdout.write(
      `board screenshot: ${shot}; page updated ${updatedIn} ms after the release\n`,
    );
    await page.close();

    // An instance that dies (SIGKILL: no shutdown hook) leaves the board within its expiry.
    process.kill(app3.pid, 'SIGKILL');
    await until(
      'app-3 disappears',
      () => overview(app1.url),
      (o) => o.instances.map((i) => i.name).join() === 'app-1,app-2',
    );
  });
});
