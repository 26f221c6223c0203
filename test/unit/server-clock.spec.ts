import type { Redis } from 'ioredis';
import { ServerClock } from '../../lib/redis/server-clock';

describe('ServerClock', () => {
  const node = (reply: () => Promise<[string, string]>) => ({ time: reply }) as unknown as Redis;

  it('knows nothing before a measure', () => {
    expect(new ServerClock(node(() => new Promise(() => undefined))).localBefore(1e12)).toBe(
      undefined,
    );
  });

  it('bounds the server clock from above by its reading minus the local send time', () => {
    const clock = new ServerClock(node(() => new Promise(() => undefined)));
    // Sent at local 100, the server read 1,000,100: it is at most 1,000,000 ms ahead.
    clock.measured(100, 1_000_100);
    // The server reaches 1,001,100 no sooner than local 1,100, less the rate allowance
    // (1 ms per s since the measure) and 2 ms.
    expect(clock.localBefore(1_001_100)).toBeCloseTo(1_100 - 1 - 2, 6);
    // A moment before the measure gets no rate allowance.
    expect(clock.localBefore(1_000_050)).toBeCloseTo(50 - 2, 6);
  });

  it('takes a newer measure, never an older one', () => {
    const clock = new ServerClock(node(() => new Promise(() => undefined)));
    clock.measured(200, 1_000_300);
    clock.measured(100, 1_000_100);
    expect(clock.localBefore(1_000_300)).toBeCloseTo(200 - 2, 6);
    clock.measured(300, 1_000_350);
    expect(clock.localBefore(1_000_350)).toBeCloseTo(300 - 2, 6);
  });

  it('measures with TIME in the background, once per period, and ignores a failed one', async () => {
    let calls = 0;
    const clock = new ServerClock(
      node(() => {
        calls++;
        return calls === 1 ? Promise.reject(new Error('down')) : Promise.resolve(['1000', '500']);
      }),
    );
    clock.refresh(0);
    await Promise.resolve();
    await Promise.resolve();
    expect(clock.localBefore(2_000_000)).toBeUndefined();
    clock.refresh(1);
    await Promise.resolve();
    await Promise.resolve();
    // TIME said 1000 s + 500 us = 1,000,000.5 ms at local 1.
    expect(clock.localBefore(1_000_000.5)).toBeCloseTo(1 - 2, 6);
    clock.refresh(5_000);
    expect(calls).toBe(2);
    clock.refresh(10_002);
    expect(calls).toBe(3);
  });
});
