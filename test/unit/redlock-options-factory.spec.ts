import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Redis } from 'ioredis';
import NodeRedlock from 'redlock';
import {
  getRedlockToken,
  InjectRedlock,
  type Redlock,
  RedlockModule,
  type RedlockModuleOptions,
  type RedlockOptionsFactory,
} from '../../lib';
import type { ResolvedRedlockOptions } from '../../lib/options/redlock-options';
import { RESOLVED_OPTIONS } from '../../lib/redlock.constants';

/**
 * The public types a module user writes against: `RedlockOptionsFactory` for `useClass` /
 * `useExisting`, and `Redlock` for `@InjectRedlock()`, both from 'nest-locked' alone (no import
 * of redlock's own types, which TypeScript cannot find under node16/nodenext resolution).
 * The client is an instance never connected, so no Redis is needed.
 */
describe('public types of the module', () => {
  const redis = new Redis({ lazyConnect: true });
  afterAll(() => redis.disconnect());

  @Injectable()
  class SyncConfig implements RedlockOptionsFactory {
    createRedlockOptions(): RedlockModuleOptions {
      return { clients: [redis], ttl: 1_234 };
    }
  }

  @Injectable()
  class AsyncConfig implements RedlockOptionsFactory {
    async createRedlockOptions(): Promise<RedlockModuleOptions> {
      return { clients: [redis], waitTimeout: 321 };
    }
  }

  @Module({ providers: [SyncConfig], exports: [SyncConfig] })
  class ConfigModule {}

  async function resolved(module: ReturnType<typeof RedlockModule.forRootAsync>) {
    const ref = await Test.createTestingModule({ imports: [module] }).compile();
    const options = ref.get<ResolvedRedlockOptions>(RESOLVED_OPTIONS);
    await ref.close();
    return options;
  }

  it('forRootAsync({ useClass }) takes a RedlockOptionsFactory', async () => {
    expect((await resolved(RedlockModule.forRootAsync({ useClass: SyncConfig }))).ttl).toBe(1_234);
    const options = await resolved(RedlockModule.forRootAsync({ useClass: AsyncConfig }));
    expect(options.waitTimeout).toBe(321);
  });

  it('forRootAsync({ useExisting }) takes one from another module', async () => {
    const module = RedlockModule.forRootAsync({ imports: [ConfigModule], useExisting: SyncConfig });
    expect((await resolved(module)).ttl).toBe(1_234);
  });

  it('@InjectRedlock() gives the node-redlock instance, typed by the exported Redlock', async () => {
    @Injectable()
    class Escape {
      constructor(@InjectRedlock() readonly redlock: Redlock) {}
    }
    const ref = await Test.createTestingModule({
      imports: [RedlockModule.forRoot({ clients: [redis] })],
      providers: [Escape],
    }).compile();
    const { redlock } = ref.get(Escape);
    expect(redlock).toBeInstanceOf(NodeRedlock);
    expect(redlock).toBe(ref.get(getRedlockToken()));
    expect([...redlock.clients]).toEqual([redis]);
    expect(redlock.settings.driftFactor).toBe(0.01);
    await ref.close();
  });
});
