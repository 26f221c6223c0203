/**
 * Names of the OpenTelemetry instruments nest-locked records (see the `telemetry` option). Each
 * carries the attribute `lock.client` (the group). The OpenTelemetry Prometheus exporter turns
 * the dots into `_` and adds `_total` to counters: `nest_locked_wait_duration_bucket`,
 * `nest_locked_acquires_total`, with labels `lock_client`, `lock_result`.
 *
 * @example
 * ```ts
 * // a test with an in-memory exporter
 * const wait = metrics.find((m) => m.descriptor.name === LOCK_METRICS.waitDuration);
 * ```
 * @publicApi
 */
export const LOCK_METRICS = Object.freeze({
  /** Histogram, ms: how long calls waited for a lock; `lock.result` is `acquired` or `busy`. */
  waitDuration: 'nest_locked.wait.duration',
  /** Histogram, ms: how long locks were held, from acquired to released. */
  holdDuration: 'nest_locked.hold.duration',
  /** Counter: acquire outcomes, by `lock.result`: `acquired`, `busy` or `error`. */
  acquires: 'nest_locked.acquires',
  /** Counter: locks lost while held, by `lock.lost_reason` (`lost`, `expired`, `maxHold`, ...). */
  lost: 'nest_locked.lost',
} as const);
