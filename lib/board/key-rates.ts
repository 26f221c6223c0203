import { type SparseCounts, toSparse, WAIT_BUCKETS, waitBucket } from './wait-histogram';

/** Length of one step of the hot-key series, ms. */
export const STEP_MS = 5_000;
/** Steps kept: five minutes. */
export const STEPS = 60;
/** Keys counted one by one per group and step; the ones past it count in the totals only. */
const KEYS_PER_STEP = 500;
/** Keys published with a series of their own. */
const TOP_KEYS = 10;

/** Counts of one step, for a key or a group's total. */
class Counts {
  acquires = 0;
  busy = 0;
  /** Wait histogram, made at the first wait of 1 ms or more (most acquires wait nothing). */
  waits?: Uint32Array;

  add(waitedMs: number, busy: boolean): void {
    if (busy) this.busy++;
    else this.acquires++;
    const b = waitBucket(waitedMs);
    if (b === 0 && !this.waits) return;
    this.waits ??= new Uint32Array(WAIT_BUCKETS);
    this.waits[b]++;
  }

  /** Bucket 0 (waits under 1 ms) is every sample the histogram did not take. */
  sparse(): SparseCounts {
    const samples = this.acquires + this.busy;
    if (!this.waits) return samples ? [[0, samples]] : [];
    let counted = 0;
    for (const n of this.waits) counted += n;
    const out = toSparse(this.waits);
    const zeros = samples - counted + this.waits[0];
    if (out[0]?.[0] === 0) out[0][1] = zeros;
    else if (zeros > 0) out.unshift([0, zeros]);
    return out;
  }
}

class Step {
  readonly total = new Counts();
  readonly keys = new Map<string, Counts>();
  constructor(readonly start: number) {}
}

/** One step as published: its start (epoch ms) and counts. */
export interface StepCounts {
  readonly t: number;
  readonly acquires: number;
  readonly busy: number;
  readonly waits: SparseCounts;
}

/** What a group's rates publish: the total series and the hottest keys' series. */
export interface GroupRates {
  readonly total: StepCounts[];
  readonly keys: Record<string, StepCounts[]>;
}

/**
 * Acquires, busy answers and wait times per group and key, in steps of `STEP_MS` over the last
 * `STEPS` steps. Recording is O(1): a Map lookup and a few increments.
 * @internal
 */
export class KeyRates {
  private readonly groups = new Map<string, Step[]>();

  constructor(private readonly now: () => number = Date.now) {}

  /** One acquire (busy false) or one call that gave up (busy true), per key. */
  record(group: string, keys: readonly string[], waitedMs: number, busy: boolean): void {
    const step = this.step(group);
    step.total.add(waitedMs, busy);
    for (const key of keys) {
      let counts = step.keys.get(key);
      if (!counts) {
        if (step.keys.size >= KEYS_PER_STEP) continue;
        counts = new Counts();
        step.keys.set(key, counts);
      }
      counts.add(waitedMs, busy);
    }
  }

  /** Every group's series: totals and the `TOP_KEYS` busiest keys of the window. */
  snapshot(group: string): GroupRates {
    const steps = this.live(group);
    const weight = new Map<string, number>();
    for (const s of steps) {
      for (const [key, c] of s.keys) weight.set(key, (weight.get(key) ?? 0) + c.acquires + c.busy);
    }
    const top = [...weight].sort((a, b) => b[1] - a[1]).slice(0, TOP_KEYS);
    const keys: Record<string, StepCounts[]> = {};
    for (const [key] of top) {
      keys[key] = steps.flatMap((s) => {
        const c = s.keys.get(key);
        return c ? [counted(s.start, c)] : [];
      });
    }
    return { total: steps.map((s) => counted(s.start, s.total)), keys };
  }

  /** The current step of `group`, started when it is due. */
  private step(group: string): Step {
    let steps = this.groups.get(group);
    if (!steps) {
      steps = [];
      this.groups.set(group, steps);
    }
    const last = steps[steps.length - 1];
    // Date.now() only once per event: cheaper than a timer per group, and no timer to stop.
    const now = this.now();
    if (last && now < last.start + STEP_MS) return last;
    const step = new Step(now - (now % STEP_MS));
    steps.push(step);
    if (steps.length > STEPS) steps.shift();
    return step;
  }

  /** The steps of `group` still inside the window. */
  private live(group: string): Step[] {
    const since = this.now() - STEPS * STEP_MS;
    return (this.groups.get(group) ?? []).filter((s) => s.start > since);
  }
}

function counted(t: number, c: Counts): StepCounts {
  return { t, acquires: c.acquires, busy: c.busy, waits: c.sparse() };
}
