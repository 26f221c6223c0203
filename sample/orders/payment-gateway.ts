import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';
import { SAMPLE_CONFIG, type SampleConfig } from '../config/sample.config';

/** The gateway refused a call: it already had `limit` calls in progress. */
export class GatewayRefusedError extends Error {
  override name = 'GatewayRefusedError';
  constructor(
    readonly inFlight: number,
    readonly limit: number,
  ) {
    super(`the payment gateway refused the call: ${inFlight} calls at once, it accepts ${limit}`);
  }
}

export interface Charge {
  readonly paymentId: string;
  readonly amount: number;
  /** Calls in progress at the gateway when this one arrived, itself included. */
  readonly inFlight: number;
}

/** What the gateway saw since its last reset. */
export interface GatewayStats {
  readonly limit: number;
  readonly calls: number;
  readonly refused: number;
  /** The most calls it had in progress at once (refused ones included: they arrived too). */
  readonly maxInFlight: number;
  readonly inFlight: number;
}

/** A call still listed after this long belongs to a process that died mid-call: dropped. */
const STALE_MS = 30_000;

/**
 * Enter: KEYS[1] in-flight zset (call id -> start ms), KEYS[2] stats hash; ARGV[1] call id,
 * ARGV[2] now (ms), ARGV[3] stale before (ms), ARGV[4] limit. Reply: calls in progress with this
 * one, negative if refused (then it is not left in the set).
 */
const ENTER = `
redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[3])
redis.call('zadd', KEYS[1], ARGV[2], ARGV[1])
local n = redis.call('zcard', KEYS[1])
redis.call('hincrby', KEYS[2], 'calls', 1)
if n > tonumber(redis.call('hget', KEYS[2], 'maxInFlight') or '0') then
  redis.call('hset', KEYS[2], 'maxInFlight', n)
end
if n > tonumber(ARGV[4]) then
  redis.call('zrem', KEYS[1], ARGV[1])
  redis.call('hincrby', KEYS[2], 'refused', 1)
  return -n
end
return n`;

type GatewayRedis = Redis & {
  gatewayEnter(
    inflight: string,
    stats: string,
    id: string,
    now: number,
    staleBefore: number,
    limit: number,
  ): Promise<number>;
};

const IN_FLIGHT = 'sample:gateway:in-flight';
const STATS = 'sample:gateway:stats';

/**
 * A simulated third-party payment gateway that accepts `SAMPLE_GATEWAY_LIMIT` calls at once (3)
 * and refuses the rest, as rate-limited providers do. It counts the calls of every instance of
 * the shop, since a real gateway sees them all: the count lives in Redis (a sorted set of calls
 * in progress), not in this process.
 */
@Injectable()
export class PaymentGateway implements OnApplicationShutdown {
  private readonly redis: GatewayRedis;

  constructor(@Inject(SAMPLE_CONFIG) private readonly config: SampleConfig) {
    this.redis = new Redis(config.gatewayRedisUrl, {
      lazyConnect: true,
      maxRetriesPerRequest: 1,
    }) as GatewayRedis;
    this.redis.defineCommand('gatewayEnter', { numberOfKeys: 2, lua: ENTER });
    // Errors reach the callers of charge(); the connection's own events are not logged twice.
    this.redis.on('error', () => undefined);
  }

  /**
   * Charges `amount` cents; takes `SAMPLE_GATEWAY_LATENCY_MS`.
   * @throws GatewayRefusedError the gateway had `limit` calls in progress already
   */
  async charge(amount: number): Promise<Charge> {
    const id = randomUUID();
    const now = Date.now();
    const { gatewayLimit: limit, gatewayLatencyMs } = this.config;
    const n = await this.redis.gatewayEnter(IN_FLIGHT, STATS, id, now, now - STALE_MS, limit);
    if (n < 0) throw new GatewayRefusedError(-n, limit);
    try {
      if (gatewayLatencyMs > 0) await sleep(gatewayLatencyMs);
    } finally {
      await this.redis.zrem(IN_FLIGHT, id);
    }
    return { paymentId: `pay_${id}`, amount, inFlight: n };
  }

  async stats(): Promise<GatewayStats> {
    const [hash, inFlight] = await Promise.all([
      this.redis.hgetall(STATS),
      this.redis.zcard(IN_FLIGHT),
    ]);
    const n = (field: string) => Number(hash[field] ?? 0);
    return {
      limit: this.config.gatewayLimit,
      calls: n('calls'),
      refused: n('refused'),
      maxInFlight: n('maxInFlight'),
      inFlight,
    };
  }

  /** Forgets the counts (not the calls in progress). */
  async resetStats(): Promise<GatewayStats> {
    await this.redis.del(STATS);
    return this.stats();
  }

  async onApplicationShutdown(): Promise<void> {
    if (this.redis.status === 'wait') return this.redis.disconnect(); // never connected
    await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
