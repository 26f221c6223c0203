import { performance } from 'node:perf_hooks';
import type { Etcd3 } from 'etcd3';

/** How long one reading of a lease's time left stands (counted down meanwhile). */
const READING_MS = 1_000;
/** Leases remembered (the map is emptied when full: bounded memory). */
const READINGS_KEPT = 1_024;

/**
 * The time left of the etcd leases of holders' keys, the busy answer of a try (see
 * `SessionBackend.busyAnswer`): the most a holder's key stays if its process dies (its session
 * lease, or a `minHold`'s own). A holder that lives renews it; nothing in etcd says how long it
 * means to hold. A reading stands for a second, counted down, so a sweep over many busy slices
 * held by one process asks etcd once, not once per slice.
 * @internal
 */
export class EtcdLeaseLeft {
  private readonly readings = new Map<string, { leftMs: number; at: number }>();

  constructor(private readonly client: Etcd3) {}

  /** The longest time left of `leases` (etcd lease ids; `'0'`: none), in ms; undefined if unknown. */
  async longest(leases: readonly (string | undefined)[]): Promise<number | undefined> {
    const ids = [...new Set(leases.filter((id): id is string => !!id && id !== '0'))];
    if (ids.length === 0) return undefined;
    try {
      const left = await Promise.all(ids.map((id) => this.of(id)));
      return Math.max(...left);
    } catch {
      // The try's answer stands (busy); only its estimate is missing.
      return undefined;
    }
  }

  private async of(id: string): Promise<number> {
    const now = performance.now();
    const reading = this.readings.get(id);
    if (reading && now - reading.at < READING_MS) {
      return Math.max(0, reading.leftMs - (now - reading.at));
    }
    const answer = await this.client.leaseClient.leaseTimeToLive({ ID: id });
    const leftMs = Math.max(0, Number(answer.TTL)) * 1000;
    if (this.readings.size >= READINGS_KEPT) this.readings.clear();
    this.readings.set(id, { leftMs, at: now });
    return leftMs;
  }
}
