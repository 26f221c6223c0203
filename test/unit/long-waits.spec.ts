import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Locked, LockService, RedlockModule } from 'nest-locked';
import type { LocalWait, LockBackend } from '../../lib/core/lock-backend';
import { LongWaits } from '../../lib/lock-order/long-waits';
import { until } from '../support/lock-app';

/**
 * A long wait names its holder (PRODUCT 2.11, go-deadlock's idea): the sweep over the waits a
 * backend reports (`waitingNow`) logs each wait past `holderReportAfter` once, with the method
 * that holds the key in this instance and for how long.
 */

/** A backend stand-in that reports the waits the test sets (a pure unit: no lock is taken). */
const backendWith = (waits: LocalWait[]) =>
  ({ name: 'default', waitingNow: () => waits }) as unknown as LockBackend;

describe('LongWaits', () => {
  it('reports each wait once, past the threshold, and a new wait of the key again', () => {
    const warned: string[] = [];
    const waits: LocalWait[] = [{ key: 'k', since: 1_000 }];
    const backend = backendWith(waits);
    const longWaits = new LongWaits(
      500,
      'host:1',
      () => ({ site: 'Shop.pay', acquiredAt: 900 }),
      (m) => warned.push(m),
    );
    longWaits.start([backend]);
    longWaits.stop();
    longWaits.sweep(1_400);
    expect(warned).toEqual([]);
    longWaits.sweep(1_600);
    longWaits.sweep(2_000);
    expect(warned).toEqual([
      'lock "k": waiting for 600 ms; held by Shop.pay in this instance (host:1) for 700 ms',
    ]);
    waits[0] = { key: 'k', since: 3_000 };
    longWaits.sweep(3_600);
    expect(warned).toHaveLength(2);
  });

  it('says when the holder is in another instance', () => {
    const warned: string[] = [];
    const longWaits = new LongWaits(
      100,
      'h:1',
      () => undefined,
      (m) => warned.push(m),
    );
    longWaits.start([backendWith([{ key: 'k', since: 0 }])]);
    longWaits.stop();
    longWaits.sweep(200);
    expect(warned[0]).toContain('its holder is in another instance');
  });
});

@Injectable()
class Slow {
  release!: () => void;

  @Locked('report:{id}', { waitTimeout: 10_000 })
  async build(id: string, held?: () => void): Promise<string> {
    if (held) {
      held();
      await new Promise<void>((r) => (this.release = r));
    }
    return id;
  }
}

describe('holderReportAfter', () => {
  it('logs who holds the key a caller has waited for too long', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedlockModule.forRoot({ backend: 'memory', holderReportAfter: 100 })],
      providers: [Slow],
    }).compile();
    const warnings: string[] = [];
    moduleRef.useLogger({
      log: () => undefined,
      error: () => undefined,
      warn: (m: unknown) => void warnings.push(String(m)),
    });
    await moduleRef.init();
    try {
      const slow = moduleRef.get(Slow);
      await new Promise<void>((held) => void slow.build('7', held));
      const waiting = slow.build('7');
      await until(
        () => warnings.some((w) => w.includes('waiting for')),
        'the long-wait log',
        5_000,
      );
      expect(warnings.find((w) => w.includes('waiting for'))).toMatch(
        /^lock "report:7": waiting for \d+ ms; held by Slow\.build in this instance \(\S+:\d+\) for \d+ ms$/,
      );
      slow.release();
      expect(await waiting).toBe('7');
      expect(moduleRef.get(LockService)).toBeDefined();
    } finally {
      await moduleRef.close();
    }
  });
});
