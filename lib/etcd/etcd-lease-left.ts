import { performance } from 'node:perf_hooks';
import type { Etcd3 } from 'etcd3';
import { firstOf } from './etcd-names';

/** How long one reading of a lease's time left stands (counted down meanwhile). */
const READING_MS = 1_000;
/** Leases remembered (the map is emptied when full: bounded memory). */
const READINGS_KEPT = 1_024;

/**
 * The time left of the etcd leases of holders' keys, the busy answer of a try or an acquire (see
 * `SessionBackend.busyAnswer`): the most a holder's key stays if its process dies (its session
 * lease, or a `minHold`'s own). A holder that lives renews it; nothing in etcd says how long it
 * means to hold. A reading stands for a second, counted down, so a sweep over many busy slices
 * held by one process asks etcd once, not once per slice. Bounded by commandTimeout: no answer
 * in time, no estimate (the caller's answer, busy, stands).
 * @internal
 */
export class EtcdLeaseLeft {
  private readonly readings = new Map<string, { leftMs: number; at: number }>();

  constructor(
    private readonly client: Etcd3,
    private readonly commandTimeout: number,
  ) {}

  /** The longest time left of `leases` (etcd lease ids; `'0'`: none), in ms; undefined if unknown. */
  longest(leases: readonly (string | undefined)[]): Promise<number | undefined> {
    return this.bounded(() => this.read(leases));
  }

  /** The same for the holders of `lines` (the first key of each), read in one round trip more. */
  ofLines(lines: readonly string[]): Promise<number | undefined> {
    return this.bounded(async () => {
      const res = await this.client.kv.txn({
        success: lines.map((line) => ({ request_range: firstOf(line) })),
      });
      return this.read(res.responses.map((r) => r.response_range?.kvs[0]?.lease));
    });
  }

  private async read(leases: readonly (string | undefined)[]): Promise<number | undefined> {
    const ids = [...new Set(leases.filter((id): id is string => !!id && id !== '0'))];
    if (ids.length === 0) return undefined;
    const left = await Promise.all(ids.map((id) => this.of(id)));
    return Math.max(...left);
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

  /** `estimate()`, or undefined when it fails or takes longer than commandTimeout. */
  private async bounded(estimate: () => Promise<number | undefined>): Promise<number | undefined> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        estimate(),
        new Promise<undefined>((resolve) => {
          timer = setTimeout(() => resolve(undefined), this.commandTimeout);
        }),
      ]);
    } catch {
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }
}
