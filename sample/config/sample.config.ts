import * as path from 'node:path';
import type { LogLevel } from '@nestjs/common';

/** Everything an instance of the sample reads from its environment, validated once. */
export interface SampleConfig {
  /** `HOST`: the interface to listen on. Loopback unless told otherwise. */
  readonly host: string;
  /** `PORT`: `0` picks a free port (printed on the ready line). */
  readonly port: number;
  /** `SAMPLE_INSTANCE`: a name for this process, written with every order and run. */
  readonly instance: string;
  /** `REDIS_URL`: one URL, or a comma-separated list for a Redlock quorum over N servers. */
  readonly redisUrls: readonly string[];
  /**
   * `SAMPLE_LOCK_POSTGRES_URL`: when set, the locks live in this PostgreSQL database
   * (`nest-locked/postgres`) instead of Redis (the gateway's counter stays in Redis).
   */
  readonly lockPostgresUrl?: string;
  /** `SAMPLE_DB_PATH`: the SQLite file every instance shares. */
  readonly dbPath: string;
  /**
   * `SAMPLE_DB_LATENCY_MS`: simulated round trip between a read and the write that depends on
   * it, as against a networked database. This is the window in which unlocked buyers race.
   */
  readonly dbLatencyMs: number;
  /** `SAMPLE_CRON`: schedule of the tick job (six fields, seconds first), or `off`. */
  readonly cron: string;
  /** `SAMPLE_LOCK_WAIT_MS`: how long a caller waits for a busy lock (the module's waitTimeout). */
  readonly lockWaitMs: number;
  /**
   * `SAMPLE_LOCK_TTL_MS`: the lease of every lock (the module's ttl), renewed by the watchdog
   * every third of it. The chaos demo shortens it so a stalled holder outlives it in seconds.
   */
  readonly lockTtlMs: number;
  /**
   * `SAMPLE_CHAOS_URL`: set by `npm run demo -- --chaos` (and its e2e test) only. A purchase
   * under the product lock then tells that URL when it holds the lock and when it has read the
   * stock, and waits for its answer each time, so the demo breaks things at those exact points
   * (`sample/products/chaos-hook.ts`). Unset: nothing is sent.
   */
  readonly chaosUrl?: string;
  /**
   * `SAMPLE_LOCK_INVERSION=on`: a transfer also posts to the day's ledger while it holds the
   * accounts, the opposite order of the ledger's close, which holds the day and audits each
   * account: a real lock-order inversion for `npm run demo -- --inversion` to show the warning of.
   */
  readonly lockInversion: boolean;
  /** `SAMPLE_LOG`: comma-separated Nest log levels (`log,warn,error` by default). */
  readonly logLevels: LogLevel[];
  /**
   * `SAMPLE_GATEWAY_REDIS_URL`: where the simulated payment gateway keeps its count of calls in
   * progress, seen by every instance (default: the first `REDIS_URL`).
   */
  readonly gatewayRedisUrl: string;
  /** `SAMPLE_GATEWAY_LIMIT`: calls at once the gateway accepts; it refuses the ones beyond. */
  readonly gatewayLimit: number;
  /** `SAMPLE_GATEWAY_LATENCY_MS`: how long one call to the gateway takes. */
  readonly gatewayLatencyMs: number;
  /** `SAMPLE_BOARD_PASSWORD`: the lock board's password (user `ops`) at `/locks`. */
  readonly boardPassword: string;
}

export const SAMPLE_CONFIG = Symbol('SAMPLE_CONFIG');

const LOG_LEVELS: readonly LogLevel[] = ['verbose', 'debug', 'log', 'warn', 'error', 'fatal'];

/** Every ten seconds; the e2e tests run it every second. */
export const DEFAULT_CRON = '*/10 * * * * *';

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(`${name} must be an integer from ${min} to ${max}, got "${raw}".`);
  }
  return value;
}

/**
 * The schedule of the tick job. `@Cron` is evaluated when the class is defined, before Nest's
 * dependency injection exists, so this is read straight from the environment (the same variable
 * `loadSampleConfig` reports).
 */
export function cronScheduleFromEnv(env: Env = process.env): string {
  return env.SAMPLE_CRON?.trim() || DEFAULT_CRON;
}

/** `@Cron` arguments for `SAMPLE_CRON`: `off` keeps a valid expression but never starts. */
export function tickSchedule(env: Env = process.env): { cronTime: string; disabled: boolean } {
  const schedule = cronScheduleFromEnv(env);
  return schedule === 'off'
    ? { cronTime: DEFAULT_CRON, disabled: true }
    : { cronTime: schedule, disabled: false };
}

/** Reads and checks the environment; a bad value stops the process with a sentence naming it. */
export function loadSampleConfig(env: Env = process.env): SampleConfig {
  const redisUrls = (env.REDIS_URL || 'redis://127.0.0.1:6379')
    .split(',')
    .map((u) => u.trim())
    .filter(Boolean);
  const logLevels = (env.SAMPLE_LOG || 'log,warn,error')
    .split(',')
    .map((l) => l.trim())
    .filter(Boolean) as LogLevel[];
  const badLevel = logLevels.find((l) => !LOG_LEVELS.includes(l));
  if (badLevel) {
    throw new Error(`SAMPLE_LOG: unknown level "${badLevel}" (use ${LOG_LEVELS.join(', ')}).`);
  }
  return Object.freeze({
    host: env.HOST || '127.0.0.1',
    port: int(env, 'PORT', 3000, 0, 65535),
    instance: env.SAMPLE_INSTANCE || `sample-${process.pid}`,
    redisUrls,
    lockPostgresUrl: env.SAMPLE_LOCK_POSTGRES_URL?.trim() || undefined,
    dbPath: path.resolve(env.SAMPLE_DB_PATH || path.join('sample', 'data', 'shop.sqlite')),
    dbLatencyMs: int(env, 'SAMPLE_DB_LATENCY_MS', 5, 0, 10_000),
    cron: cronScheduleFromEnv(env),
    lockWaitMs: int(env, 'SAMPLE_LOCK_WAIT_MS', 10_000, 0, 600_000),
    lockTtlMs: int(env, 'SAMPLE_LOCK_TTL_MS', 30_000, 100, 3_600_000),
    ...(env.SAMPLE_CHAOS_URL?.trim() ? { chaosUrl: env.SAMPLE_CHAOS_URL.trim() } : {}),
    logLevels,
    gatewayRedisUrl:
      env.SAMPLE_GATEWAY_REDIS_URL?.trim() || redisUrls[0] || 'redis://127.0.0.1:6379',
    gatewayLimit: int(env, 'SAMPLE_GATEWAY_LIMIT', 3, 1, 1_000),
    gatewayLatencyMs: int(env, 'SAMPLE_GATEWAY_LATENCY_MS', 20, 0, 10_000),
    boardPassword: env.SAMPLE_BOARD_PASSWORD || 'locks',
    lockInversion: env.SAMPLE_LOCK_INVERSION === 'on',
  });
}
