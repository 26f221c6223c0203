import { randomBytes } from 'node:crypto';
import type { DynamicModule, INestApplication, Provider, Type } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type { Redis } from 'ioredis';
import { type LockService, RedlockModule, type RedlockModuleOptions } from 'nest-locked';

/**
 * In-process Nest applications for the integration suites: `RedlockModule.forRoot(options)` plus
 * the providers and controllers under test, initialised (so `@Locked`, the explorer and the
 * global `LockInterceptor` are live) and ready for supertest. Close it with `app.close()`.
 */
export async function createLockApp(setup: {
  options: RedlockModuleOptions;
  providers?: Provider[];
  controllers?: Type[];
  imports?: (DynamicModule | Type)[];
}): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: [RedlockModule.forRoot(setup.options), ...(setup.imports ?? [])],
    providers: setup.providers ?? [],
    controllers: setup.controllers ?? [],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.init();
  return app;
}

/** A keyPrefix no other test (or earlier run against the same server) uses. */
export const uniquePrefix = (name: string): string =>
  `t:${name}:${randomBytes(4).toString('hex')}:`;

/** Redis key of a lock on `key` under `prefix` (`<prefix>{<key>}`, see keyPrefix). */
export const lockRedisKey = (prefix: string, key: string): string => `${prefix}{${key}}`;

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Takes `key` and holds it until the function it resolves to is called. */
export async function holdUntilReleased(locks: LockService, key: string): Promise<() => void> {
  let release!: () => void;
  await new Promise<void>(
    (held) =>
      void locks.using(key, () => {
        held();
        return new Promise<void>((done) => (release = done));
      }),
  );
  return release;
}

/**
 * Waits until `check` holds: a barrier that holds on a loaded machine too, where a sleep of a
 * fixed length does not. Polls every few ms; fails naming `what` after `ms`.
 */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  ms = 5_000,
): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms: ${what}`);
    await sleep(5);
  }
}

/**
 * Waits until `count` entries are in the Redis queue of `key` under `prefix`: one per waiting
 * process head of an exclusive lock or of a read lock, one per waiter of permits.
 */
export const queuedInRedis = (
  redis: Pick<Redis, 'zcard'>,
  prefix: string,
  key: string,
  count: number,
) =>
  until(
    async () => (await redis.zcard(`${lockRedisKey(prefix, key)}:q`)) === count,
    `${count} queued in Redis for ${key}`,
  );

/** Rejects if `promise` does not settle within `ms` (to turn a hang into a clear failure). */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, limit]);
  } finally {
    clearTimeout(timer);
  }
}

/** Settles `promise` and measures how long it took. */
export async function timed<T>(
  promise: Promise<T>,
): Promise<{ ok: true; value: T; ms: number } | { ok: false; error: unknown; ms: number }> {
  const start = performance.now();
  try {
    const value = await promise;
    return { ok: true, value, ms: performance.now() - start };
  } catch (error) {
    return { ok: false, error, ms: performance.now() - start };
  }
}
