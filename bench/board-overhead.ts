/**
 * The lock board's cost on the lock path: uncontended cycles (one caller, a new key each time)
 * and a hot key (32 callers on one key), with the board absent, then mounted with a page open
 * (an event stream read the whole time), alternated A/B over a few rounds on one redis-server.
 *
 *   npx ts-node --transpile-only -r tsconfig-paths/register bench/board-overhead.ts [--rounds 5]
 */
import 'reflect-metadata';
import * as http from 'node:http';
import { performance } from 'node:perf_hooks';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockService, RedlockModule } from 'nest-locked';
import { LockBoardModule } from 'nest-locked/board';
import { KeyRates } from '../lib/board/key-rates';
import { startRedisServer } from '../test/support/redis-server';

const UNCONTENDED_CYCLES = 3_000;
const HOT_CALLERS = 32;
const HOT_CYCLES = 3_000;

async function app(url: string, board: boolean) {
  @Module({
    imports: [
      RedlockModule.forRoot({ clients: [url], keyPrefix: `bench:${board}:${Date.now()}:` }),
      ...(board ? [LockBoardModule.forRoot({ public: true, instance: 'bench' })] : []),
    ],
  })
  class AppModule {}
  const nest = await NestFactory.create(AppModule, { logger: ['error'] });
  await nest.listen(0, '127.0.0.1');
  const port = (nest.getHttpServer().address() as { port: number }).port;
  // The page open: its event stream read for the whole run.
  const stream = board
    ? http.get(`http://127.0.0.1:${port}/locks/api/stream?view=overview`, (res) => res.resume())
    : undefined;
  return { nest, locks: nest.get(LockService), close: () => (stream?.destroy(), nest.close()) };
}

async function uncontended(locks: LockService): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < UNCONTENDED_CYCLES; i++) await locks.using(`u:${i}`, () => undefined);
  return UNCONTENDED_CYCLES / ((performance.now() - start) / 1000);
}

async function hot(locks: LockService): Promise<number> {
  let left = HOT_CYCLES;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: HOT_CALLERS }, async () => {
      while (left-- > 0) await locks.using('hot', () => undefined);
    }),
  );
  return HOT_CYCLES / ((performance.now() - start) / 1000);
}

/** What the lock path pays per event with the board imported: one KeyRates.record, in ns. */
function recordCost(): number {
  const rates = new KeyRates();
  const keys = Array.from({ length: 1_000 }, (_, i) => [`k:${i}`]);
  const n = 2_000_000;
  for (let i = 0; i < n / 10; i++) rates.record('g', keys[i % 1_000], i % 7, false); // warm-up
  const start = performance.now();
  for (let i = 0; i < n; i++) rates.record('g', keys[i % 1_000], i % 7, i % 50 === 0);
  return ((performance.now() - start) * 1e6) / n;
}

async function main(): Promise<void> {
  process.stdout.write(`KeyRates.record: ${recordCost().toFixed(0)} ns per event\n`);
  const rounds = Number(process.argv[process.argv.indexOf('--rounds') + 1]) || 5;
  const redis = await startRedisServer();
  const results: Record<string, { uncontended: number[]; hot: number[] }> = {
    absent: { uncontended: [], hot: [] },
    'mounted+open': { uncontended: [], hot: [] },
  };
  try {
    for (let r = 0; r < rounds; r++) {
      for (const board of [false, true]) {
        const a = await app(redis.url, board);
        // Warm-up of both paths (JIT), then the measured runs.
        await uncontended(a.locks);
        await hot(a.locks);
        const row = results[board ? 'mounted+open' : 'absent'];
        row.uncontended.push(await uncontended(a.locks));
        row.hot.push(await hot(a.locks));
        await a.close();
      }
    }
  } finally {
    await redis.stop();
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  for (const [name, row] of Object.entries(results)) {
    process.stdout.write(
      `${name.padEnd(13)} uncontended ${median(row.uncontended).toFixed(0)} cycles/s ` +
        `(${row.uncontended.map((x) => x.toFixed(0)).join(', ')}); ` +
        `hot key ${median(row.hot).toFixed(0)} cycles/s (${row.hot.map((x) => x.toFixed(0)).join(', ')})\n`,
    );
  }
}

void main();
