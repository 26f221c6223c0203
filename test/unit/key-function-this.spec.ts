import 'reflect-metadata';
import { Injectable } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { LockContext, Locked } from 'nest-locked';
import { RedlockTestingModule } from 'nest-locked/testing';

/**
 * Issue 26, item 16: a key function sees the instance as `this` (a `function`, not an arrow,
 * typed with a `this` parameter), so a key can use instance state; `(...args) => key` functions
 * keep working unchanged.
 */
// The key functions read the methods' parameters; the bodies do not.
/* eslint-disable @typescript-eslint/no-unused-vars */
@Injectable()
class Orders {
  tenant = 'acme';

  @Locked(function (this: Orders, id: string) {
    return `${this.tenant}:order:${id}`;
  })
  async settle(id: string): Promise<readonly string[] | undefined> {
    return LockContext.current()?.keys;
  }

  @Locked((id: string) => `order:${id}`)
  async plain(id: string): Promise<readonly string[] | undefined> {
    return LockContext.current()?.keys;
  }
}
/* eslint-enable @typescript-eslint/no-unused-vars */

describe('a key function', () => {
  let moduleRef: TestingModule;
  let orders: Orders;
  beforeAll(async () => {
    moduleRef = await Test.createTestingModule({
      imports: [RedlockTestingModule.forRoot()],
      providers: [Orders],
    }).compile();
    await moduleRef.init();
    orders = moduleRef.get(Orders);
  });
  afterAll(() => moduleRef.close());

  it('is called with the instance as this', async () => {
    await expect(orders.settle('7')).resolves.toEqual(['acme:order:7']);
    orders.tenant = 'globex';
    await expect(orders.settle('7')).resolves.toEqual(['globex:order:7']);
  });

  it('without a this parameter (an arrow) works as before', async () => {
    await expect(orders.plain('7')).resolves.toEqual(['order:7']);
  });
});
