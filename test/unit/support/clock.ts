import { performance } from 'node:perf_hooks';

/**
 * A hand-driven `performance.now()` (the one of `node:perf_hooks`, which the engine reads and
 * jest's fake timers leave alone).
 */
export interface ManualClock {
  now(): number;
  set(t: number): void;
  advance(ms: number): void;
}

export function manualPerformanceNow(start = 1_000): ManualClock {
  let t = start;
  jest.spyOn(performance, 'now').mockImplementation(() => t);
  return {
    now: () => t,
    set: (v) => {
      t = v;
    },
    advance: (ms) => {
      t += ms;
    },
  };
}

/**
 * Jest's fake timers with `performance.now()` following the fake `Date.now()` (advancing the
 * timers advances both), starting at `performance.now() === 0`.
 */
export interface FakeTime {
  now(): number;
  /**
   * An event loop blocked for `ms`: the clock jumps first, then every timer that came due
   * meanwhile runs, all of them seeing the time after the pause.
   */
  pause(ms: number): Promise<void>;
}

/** Reads of one instant past which code is taken to loop, waiting for the clock to move. */
export const SPIN_READS = 100_000;

export function fakeTimersWithPerformance(): FakeTime {
  jest.useFakeTimers({ now: 1_700_000_000_000 });
  const origin = Date.now();
  let frozen: number | undefined;
  const now = () => frozen ?? Date.now() - origin;
  // On this clock time stands still within a callback: code that loops until it moves would
  // hang the test (and run out of memory), so it fails instead.
  let last = NaN;
  let reads = 0;
  jest.spyOn(performance, 'now').mockImplementation(() => {
    const t = now();
    reads = t === last ? reads + 1 : 0;
    last = t;
    if (reads > SPIN_READS)
      throw new Error(`performance.now() read ${SPIN_READS} times at ${t}: a loop waits for time`);
    return t;
  });
  return {
    now,
    pause: async (ms) => {
      frozen = now() + ms;
      try {
        await jest.advanceTimersByTimeAsync(ms);
      } finally {
        frozen = undefined;
      }
    },
  };
}
