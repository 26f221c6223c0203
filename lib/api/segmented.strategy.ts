import { performance } from 'node:perf_hooks';
import { AllSegmentsExhaustedError, LockNotAcquiredError, SegmentExhaustedError } from '../errors';
import { SEGMENT_EXHAUSTED_MS } from '../redlock.constants';

/**
 * A line for a slice held in another process counts as this many callers longer than one for a
 * slice held here: its head has to queue in Redis behind the other processes' heads, while a
 * local holder hands the slice over with no round trip.
 */
const REMOTE_LINE_COST = 4;

/**
 * For this long after a sweep found every slice busy, a call that can wait in a short line for a
 * slice held in this process (shorter than REMOTE_LINE_COST) joins it without sweeping again:
 * under load that sweep would almost surely fail, a round trip spent for nothing, while the
 * local holder hands the slice over for free. Past it, or with no such line, calls sweep.
 */
const SKIP_SWEEP_MS = 20;
/** Resources remembered with a busy sweep (the map is emptied when full: bounded memory). */
const BUSY_SWEEPS_KEPT = 1_000;

/** Abort reason of a wait whose slice another caller found exhausted. */
const EXHAUSTED_WHILE_WAITING = Symbol('segment exhausted while waiting');

/** The lock key of one slice of a segmented resource. @internal */
export const sliceKey = (base: string, segment: number): string => `${base}:seg:${segment}`;

/** What the strategy needs from the lock engine for one call. @internal */
export interface SegmentCall<T> {
  /** `<client>\0<base key>`: where exhausted slices are remembered. */
  readonly id: string;
  readonly base: string;
  readonly segments: number;
  readonly waitTimeout: number;
  /** The caller's signal: ends the call (sweeps and waits) with its reason. */
  readonly signal?: AbortSignal;
  /**
   * Takes the slice (waiting up to `waitMs`, 0 = one try), runs the method under it and releases
   * it. `busy` when the slice stayed held by someone else. A `SegmentExhaustedError` thrown by
   * the method comes through (after the release).
   */
  tryRun(
    segment: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<{ busy: true; pttl: number } | { busy: false; value: T }>;
  /** How many callers of this process already wait for the slice. */
  queued(segment: number): number;
  /** Optional: whether a caller of this process holds the slice (it hands it over for free). */
  heldHere?(segment: number): boolean;
  /**
   * Optional: the whole sweep in one round trip. Takes the first free slice of `order`, runs the
   * method under it and releases it; a slice whose method threw `SegmentExhaustedError` comes
   * back as `exhausted`.
   */
  tryAny?(
    order: readonly number[],
  ): Promise<
    | { busy: true; pttl: number }
    | { busy: false; value: T }
    | { busy: false; exhausted: SegmentExhaustedError; segment: number }
  >;
}

/**
 * The segmented strategy (sliced locks): one hot resource split into N slices, each
 * its own lock, so N callers proceed at once. A call sweeps the slices from a random start
 * without waiting, one slice at a time (never two held by one call). If every usable slice is
 * busy it waits in line for the slice with the shortest local queue (one held in this process
 * counting four callers shorter): that slice's holder hands it over directly when done, and a release in another process wakes the line's head, so the
 * callers of a process spread evenly over the slices instead of all stampeding at every
 * release. A slice whose method threw `SegmentExhaustedError` is skipped for a second (or until
 * `reset`), so a replenished resource needs no restart.
 * @internal
 */
export class SegmentedStrategy {
  /** Per resource: slice -> `performance.now()` until which it counts as exhausted. */
  private readonly exhausted = new Map<string, Map<number, number>>();
  /** Per resource: `performance.now()` of the last sweep that found every slice busy. */
  private readonly busySweeps = new Map<string, number>();
  /** Per resource and slice: the waits in line for it, ended when it is found exhausted. */
  private readonly waiting = new Map<string, Set<{ segment: number; stop: AbortController }>>();

  constructor(
    private readonly exhaustedMs = SEGMENT_EXHAUSTED_MS,
    private readonly random: () => number = Math.random,
  ) {}

  /** Forgets the exhausted slices of a resource at once. */
  reset(id: string): void {
    this.exhausted.delete(id);
  }

  async run<T>(call: SegmentCall<T>): Promise<T> {
    const { segments } = call;
    const startedAt = performance.now();
    const deadline = startedAt + call.waitTimeout;
    const start = Math.floor(this.random() * segments);
    let lastCause: SegmentExhaustedError | undefined;
    let pttl = 0;
    const cost = (segment: number) =>
      call.queued(segment) + (call.heldHere?.(segment) ? 0 : REMOTE_LINE_COST);
    for (;;) {
      call.signal?.throwIfAborted();
      // 1. Sweep: every usable slice once, without waiting (unless a sweep moments ago found
      // them all busy and a short line for a slice held here is open).
      const usable: number[] = [];
      let best: number | undefined;
      if (call.tryAny) {
        for (let i = 0; i < segments; i++) {
          const segment = (start + i) % segments;
          if (!this.isExhausted(call.id, segment)) usable.push(segment);
        }
        best = this.shortLocalLine(call, usable, cost);
        if (best === undefined && usable.length > 0) {
          const r = await call.tryAny(usable);
          if (r.busy) {
            pttl = r.pttl;
            this.sweptBusy(call.id);
          } else {
            this.busySweeps.delete(call.id);
            if (!('exhausted' in r)) return r.value;
            this.markExhausted(call.id, r.segment);
            lastCause = r.exhausted;
            continue;
          }
        }
      }
      for (let i = 0; i < segments && !call.tryAny; i++) {
        const segment = (start + i) % segments;
        if (this.isExhausted(call.id, segment)) continue;
        try {
          const r = await call.tryRun(segment, 0);
          if (!r.busy) return r.value;
          pttl = r.pttl;
          usable.push(segment);
        } catch (err) {
          if (!(err instanceof SegmentExhaustedError)) throw err;
          this.markExhausted(call.id, segment);
          lastCause = err;
        }
      }
      if (usable.length === 0) {
        throw new AllSegmentsExhaustedError([call.base], segments, lastCause);
      }
      const remaining = deadline - performance.now();
      if (remaining <= 0) {
        throw new LockNotAcquiredError([call.base], performance.now() - startedAt, pttl);
      }
      // 2. Wait in the shortest line (ties: the first in sweep order). If the slice is found
      // exhausted meanwhile (by the caller ahead), leave the line and sweep again.
      if (best === undefined) {
        best = usable[0];
        for (const segment of usable) if (cost(segment) < cost(best)) best = segment;
      }
      const wait = { segment: best, stop: new AbortController() };
      let waits = this.waiting.get(call.id);
      if (!waits) this.waiting.set(call.id, (waits = new Set()));
      waits.add(wait);
      try {
        const signal = call.signal
          ? AbortSignal.any([wait.stop.signal, call.signal])
          : wait.stop.signal;
        const r = await call.tryRun(best, remaining, signal);
        if (!r.busy) return r.value;
        throw new LockNotAcquiredError([call.base], performance.now() - startedAt, r.pttl);
      } catch (err) {
        if (err === EXHAUSTED_WHILE_WAITING) continue;
        if (!(err instanceof SegmentExhaustedError)) throw err;
        this.markExhausted(call.id, best);
        lastCause = err;
      } finally {
        waits.delete(wait);
        if (waits.size === 0 && this.waiting.get(call.id) === waits) this.waiting.delete(call.id);
      }
    }
  }

  /**
   * A slice held in this process whose line is short, if a sweep found every slice busy moments
   * ago (SKIP_SWEEP_MS): the call waits there instead of sweeping again.
   */
  private shortLocalLine(
    call: SegmentCall<unknown>,
    usable: readonly number[],
    cost: (segment: number) => number,
  ): number | undefined {
    const at = this.busySweeps.get(call.id);
    if (at === undefined || !call.heldHere) return undefined;
    if (performance.now() - at >= SKIP_SWEEP_MS) {
      this.busySweeps.delete(call.id);
      return undefined;
    }
    let best: number | undefined;
    for (const segment of usable) {
      const c = cost(segment);
      if (c < REMOTE_LINE_COST && (best === undefined || c < cost(best))) best = segment;
    }
    return best;
  }

  private sweptBusy(id: string): void {
    if (this.busySweeps.size >= BUSY_SWEEPS_KEPT) this.busySweeps.clear();
    this.busySweeps.set(id, performance.now());
  }

  private isExhausted(id: string, segment: number): boolean {
    const slices = this.exhausted.get(id);
    const until = slices?.get(segment);
    if (until === undefined) return false;
    if (performance.now() < until) return true;
    slices!.delete(segment);
    if (slices!.size === 0) this.exhausted.delete(id);
    return false;
  }

  private markExhausted(id: string, segment: number): void {
    let slices = this.exhausted.get(id);
    if (!slices) {
      slices = new Map();
      this.exhausted.set(id, slices);
    }
    slices.set(segment, performance.now() + this.exhaustedMs);
    for (const wait of this.waiting.get(id) ?? []) {
      if (wait.segment === segment) wait.stop.abort(EXHAUSTED_WHILE_WAITING);
    }
  }
}
