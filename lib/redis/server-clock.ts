import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';

/** How often the bound is measured again (a TIME round trip in the background). */
const SAMPLE_EVERY_MS = 10_000;

/**
 * Clock rates differ: the bound allows this much per ms since it was measured (1,000 ppm, twice
 * the fastest NTP slew), plus `SLACK_MS` (Redis keeps expiries in whole ms).
 */
const RATE_ALLOWANCE = 1e-3;
const SLACK_MS = 2;

/**
 * What this process knows of one Redis server's clock: from a TIME round trip sent at local
 * `sent` (`performance.now()`), the server's clock read S ms at some moment of the round trip, so
 * it is at most `S - sent` ms ahead of the local clock. A moment of the server's clock (when a
 * grant set a claim window, say) thus gives the latest local moment by which the server has
 * surely not reached it yet, less an allowance for the two clocks' rates since the measure.
 * Never an exact offset: only this one-sided bound, which a slow round trip makes more cautious,
 * never wrong. Measured in the background, at most every 10 s, when asked to (`refresh`).
 * @internal
 */
export class ServerClock {
  /** Upper bound of (server ms - local ms), from the last measure. */
  private maxAhead?: number;
  /** Local time of the last measure. */
  private measuredAt = -Infinity;
  /** Local time the measure on its way was sent (undefined: none on its way). */
  private pendingSince?: number;

  constructor(private readonly node: Redis) {}

  /** Measures the bound again in the background if it is old or missing (never waits). */
  refresh(now = performance.now()): void {
    if (now - this.measuredAt < SAMPLE_EVERY_MS) return;
    // One at a time; one stuck past the period is given up on.
    if (this.pendingSince !== undefined && now - this.pendingSince < SAMPLE_EVERY_MS) return;
    const sent = now;
    this.pendingSince = sent;
    this.node.time().then(
      ([seconds, micros]) => {
        if (this.pendingSince === sent) this.pendingSince = undefined;
        this.measured(sent, Number(seconds) * 1000 + Number(micros) / 1000);
      },
      () => {
        if (this.pendingSince === sent) this.pendingSince = undefined;
      },
    );
  }

  /** A measure: sent at local `sent`, the server's clock read `serverMs`. */
  measured(sent: number, serverMs: number): void {
    if (!Number.isFinite(serverMs) || sent < this.measuredAt) return;
    this.maxAhead = serverMs - sent;
    this.measuredAt = sent;
  }

  /**
   * The latest local moment (`performance.now()`) at which the server's clock is surely still
   * before `serverMs`; undefined while nothing was measured.
   */
  localBefore(serverMs: number): number | undefined {
    if (this.maxAhead === undefined) return undefined;
    const local = serverMs - this.maxAhead;
    return local - Math.max(0, local - this.measuredAt) * RATE_ALLOWANCE - SLACK_MS;
  }
}
