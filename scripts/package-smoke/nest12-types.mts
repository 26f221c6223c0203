// Type-checked (not run) by `npm run check:package` in the Nest 12 ESM smoke app, under
// moduleResolution nodenext: what an app's editor sees of the packed declarations. Each
// expected error below must be one (tsc fails on an unused directive), so the types cannot
// silently degrade to `any`.
import { Injectable } from '@nestjs/common';
import {
  InjectRedlock,
  Locked,
  type Redlock,
  type RedlockModuleOptions,
  type RedlockOptionsFactory,
} from 'nest-locked';

@Injectable()
export class Shop {
  constructor(@InjectRedlock() readonly redlock: Redlock) {}

  @Locked('product:{0}')
  async purchase(id: number, qty: number): Promise<number> {
    return id + qty;
  }

  // @ts-expect-error: argument 2 of a one-parameter method
  @Locked('product:{2}')
  async pastTheEnd(id: number): Promise<number> {
    return id;
  }

  // @ts-expect-error: a sync method would claim to return a number
  @Locked('product:{0}')
  sync(id: number): number {
    return id;
  }
}

export async function escapeHatch(shop: Shop): Promise<void> {
  // @ts-expect-error: Redlock is typed (not any): acquire takes an array of resources
  await shop.redlock.acquire('product:1', 1_000);
}

export class Config implements RedlockOptionsFactory {
  createRedlockOptions(): RedlockModuleOptions {
    return { clients: ['redis://127.0.0.1:6379'], ttl: 10_000 };
  }
}
