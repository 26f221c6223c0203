/// <reference lib="dom" />
import * as os from 'node:os';
import * as path from 'node:path';
import { type INestApplication, type INestApplicationContext, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import type { Page } from 'playwright-core';
import { LockService, RedlockModule } from 'nest-locked';
import { LockBoardModule, lockBoardBasicAuth } from 'nest-locked/board';
import { holdUntilReleased, uniquePrefix } from '../support/lock-app';
import { type RedisServerHandle, useRedis } from '../support/redis-server';
import { boardOverview, readUntil } from './support/board-api';
import { boardBrowser } from './support/board-browser';

/**
 * The board's page in a browser over instances in this process: a web app that serves the
 * page and a worker without HTTP (an application context). What a user reads on it: the
 * worker's holds with holder and fence, how many wait, a key's events, and the charts' idle
 * gaps and time axis. Screenshots go to BOARD_E2E_OUTPUT.
 */
jest.setTimeout(120_000);

const AUTH = { username: 'ops', password: 'locks' };
const HEADER = `Basic ${Buffer.from('ops:locks').toString('base64')}`;
const artifacts = process.env.BOARD_E2E_OUTPUT ?? path.join(os.tmpdir(), 'nest-locked-board-e2e');

let redis: RedisServerHandle;
let browser: Awaited<ReturnType<typeof boardBrowser>>;
let web: INestApplication;
let worker: INestApplicationContext;
let url: string;

/** A text a chart drew on its canvas: where, aligned how, and how wide. */
interface DrawnLabel {
  readonly text: string;
  readonly x: number;
  readonly y: number;
  readonly align: string;
  readonly width: number;
}

/** An instance's root module: the lock module and the board, on this file's Redis. */
function instanceModule(prefix: string, instance: string) {
  @Module({
    imports: [
      RedlockModule.forRoot({ clients: [redis.url], keyPrefix: prefix, waitTimeout: 60_000 }),
      LockBoardModule.forRoot({
        guard: lockBoardBasicAuth({ user: AUTH.username, password: AUTH.password }),
        instance,
        publishInterval: 200,
        expiry: 2_000,
      }),
    ],
  })
  class InstanceModule {}
  return InstanceModule;
}

beforeAll(async () => {
  redis = await useRedis();
  const prefix = uniquePrefix('board-page');
  web = await NestFactory.create(instanceModule(prefix, 'web'), { logger: false });
  await web.listen(0, '127.0.0.1');
  url = await web.getUrl();
  worker = await NestFactory.createApplicationContext(instanceModule(prefix, 'worker'), {
    logger: false,
  });
  browser = await boardBrowser(AUTH);
});

afterAll(async () => {
  await browser?.close();
  await worker?.close();
  await web?.close();
  await redis?.stop();
});

const overview = () => boardOverview(url, HEADER);

async function screenshot(page: Page, name: string): Promise<void> {
  const file = path.join(artifacts, name);
  await page.screenshot({ path: file, fullPage: true });
  process.stdout.write(`board screenshot: ${file}\n`);
}

describe('the lock board page', () => {
  it("shows a worker's hold with holder and fence, every waiter counted, and a key's events", async () => {
    const [webLocks, workerLocks] = [web.get(LockService), worker.get(LockService)];
    const release = await holdUntilReleased(workerLocks, 'product:2');
    // Three callers wait: one of web, two of the worker (behind its own hold).
    const waiting = [webLocks, workerLocks, workerLocks].map((locks) =>
      locks.using('product:2', () => undefined),
    );
    // Ten callers of web give up: busy answers of the same key.
    for (let i = 0; i < 10; i++) {
      await webLocks.using('product:2', () => undefined, { waitTimeout: 20 }).catch(() => 0);
    }
    try {
      const page = await browser.context.newPage();
      await page.setViewportSize({ width: 1400, height: 1000 });
      await page.goto(`${url}/locks/`);
      const row = page.locator('#held tbody tr', { hasText: 'product:2' });
      await row.filter({ hasText: 'worker' }).waitFor({ timeout: 10_000 });
      await page.waitForFunction(
        () => /^\d+$/.test(document.querySelectorAll('#held tbody tr td')[3]?.textContent ?? ''),
        undefined,
        { timeout: 10_000 },
      );
      const cells = await row.locator('td').allInnerTexts();
      expect(cells[2]).toBe('worker');
      expect(cells[3]).toMatch(/^\d+$/); // the fence
      const heading = page.locator('#lines h3', { hasText: 'product:2' });
      await heading.filter({ hasText: /\b3 waiting/ }).waitFor({ timeout: 10_000 });
      expect(await heading.innerText()).not.toContain('at least');
      await screenshot(page, 'board-overview.png');

      // The key's page: its busy answers are listed, so its events are not "none yet".
      await page.evaluate(() => (location.hash = '#/key/default/product%3A2'));
      await page.locator('#kbusy tbody tr').first().waitFor({ timeout: 10_000 });
      expect(await page.locator('#kbusy tbody tr').count()).toBe(10);
      expect(await page.locator('#kevents').innerText()).not.toContain('No events yet');
      await page.locator('#kline', { hasText: /\b3 waiting/ }).waitFor({ timeout: 10_000 });
      await screenshot(page, 'board-key.png');
      await page.close();
    } finally {
      release();
      await Promise.all(waiting);
    }
  });

  it('draws an idle period as a gap or a zero, with time labels that do not overlap', async () => {
    const locks = web.get(LockService);
    // Four callers take the key five times each, holding it 5 ms: acquires and waits.
    const work = () => new Promise((r) => setTimeout(r, 5));
    const burst = () =>
      Promise.all(
        [1, 2, 3, 4].map(async () => {
          for (let i = 0; i < 5; i++) await locks.using('report:gap', work);
        }),
      );
    await burst();
    // Two whole steps (5 s each) with nothing, then activity again.
    await readUntil(
      'two idle steps',
      overview,
      (o) => {
        const a = o.hot.series.acquiresPerSec;
        return a.length > 0 && a.slice(-3).every((v) => v === 0);
      },
      30_000,
    );
    await burst();

    const page = await browser.context.newPage();
    // Every label drawn on a canvas since its last clear: what the chart shows now.
    await page.addInitScript(() => {
      const drawn = new Map<HTMLCanvasElement, DrawnLabel[]>();
      (window as unknown as { labels: () => DrawnLabel[][] }).labels = () => [...drawn.values()];
      const proto = CanvasRenderingContext2D.prototype;
      const { fillText, clearRect } = proto;
      proto.fillText = function (text: string, x: number, y: number, max?: number) {
        const list = drawn.get(this.canvas) ?? [];
        const width = this.measureText(text).width;
        list.push({ text, x, y, align: this.textAlign, width });
        drawn.set(this.canvas, list);
        return fillText.call(this, text, x, y, max);
      };
      proto.clearRect = function (...args: [number, number, number, number]) {
        drawn.set(this.canvas, []);
        return clearRect.apply(this, args);
      };
    });
    await page.setViewportSize({ width: 1400, height: 1000 });
    await page.goto(`${url}/locks/`);
    await page.locator('#hot .chart-summary', { hasText: 'Latest 5 s' }).waitFor();
    // Both charts drawn, their labels read in one go (a draw runs whole between two reads).
    const labels = await page.waitForFunction(() => {
      const all = (window as unknown as { labels: () => DrawnLabel[][] }).labels();
      return all.length >= 2 && all.every((l) => l.length > 0) ? all : false;
    });
    const charts = (await labels.jsonValue()) as DrawnLabel[][];
    for (const drawn of charts) {
      // The time axis: its labels are the centred ones (the value axes' are aligned to a side).
      const axis = drawn.filter((l) => l.align === 'center');
      expect(axis.length).toBeGreaterThanOrEqual(2);
      // The charts cover 5 minutes: the time of day, never the date.
      for (const label of axis) expect(label.text).not.toMatch(/\d+\/\d+\/\d+/);
      // Labels on one line leave room between them.
      for (const y of new Set(axis.map((l) => l.y))) {
        const spans = axis
          .filter((l) => l.y === y)
          .map((l) => [l.x - l.width / 2, l.x + l.width / 2])
          .sort((a, b) => a[0] - b[0]);
        for (let i = 1; i < spans.length; i++) {
          expect(spans[i][0]).toBeGreaterThan(spans[i - 1][1]);
        }
      }
    }
    await page.locator('#hot').screenshot({ path: path.join(artifacts, 'board-chart-gap.png') });
    await page.close();
  });
});
