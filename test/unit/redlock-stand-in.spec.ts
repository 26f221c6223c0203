import { Injectable } from '@nestjs/common';
import { ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { LockConfigError, RedlockModule, getRedlockToken } from 'nest-locked';

@Injectable()
class Jobs {
  run(): number {
    return 1;
  }
}

/**
 * A group without Redis has no Redlock instance: its `@InjectRedlock` provider is a stand-in that
 * fails when used, yet other modules that scan every provider's methods at startup (the
 * scheduler) must find nothing to trip on.
 */
describe('the Redlock stand-in of a group without Redis', () => {
  it('lets @nestjs/schedule scan every provider at startup', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedlockModule.forRoot({ backend: 'memory' }), ScheduleModule.forRoot()],
      providers: [Jobs],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    await expect(app.init()).resolves.toBe(app);
    const stand = app.get(getRedlockToken());
    expect(() => (stand as { acquire: unknown }).acquire).toThrow(LockConfigError);
    await app.close();
  });
});
