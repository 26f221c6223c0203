// Smoke app for `npm run check:package`: an app on another backend than Redis, installed without
// ioredis. Its types compile without ioredis (tsc without skipLibCheck), and it starts and locks.
// It type-checks a PostgreSQL group and runs on the memory backend (no database server here).
import 'reflect-metadata';
import assert from 'node:assert/strict';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  LockContext,
  Locked,
  LockService,
  RedlockModule,
  type RedlockClientEntry,
  type RedlockModuleOptions,
} from 'nest-locked';
import { postgresBackend } from 'nest-locked/postgres';

setTimeout(() => {
  console.error('no-ioredis: no result within 30 s');
  process.exit(1);
}, 30_000).unref();

/** What a PostgreSQL-only app configures (type-checked only: no database runs here). */
export const onPostgres: RedlockModuleOptions = {
  backend: postgresBackend({ connectionString: 'postgres://127.0.0.1/app' }),
};
/** The Redis option types stay checked without ioredis: a URL and options. */
export const redisNodes: RedlockClientEntry[] = ['redis://127.0.0.1:6379', { host: 'h', port: 1 }];

@Injectable()
class Orders {
  @Locked('order:{0}')
  async pay(id: string): Promise<string> {
    return `${id}: fence ${LockContext.current()!.fence}`;
  }
}

@Module({ imports: [RedlockModule.forRoot({ backend: 'memory' })], providers: [Orders] })
class AppModule {}

async function main(): Promise<void> {
  assert.throws(() => require.resolve('ioredis'), /Cannot find module 'ioredis'/);
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  const paid = [await app.get(Orders).pay('1'), await app.get(Orders).pay('1')];
  assert.deepEqual(paid, ['1: fence 1', '1: fence 2']);
  assert.equal(app.get(LockService).stats().subscriptions, 0);
  await app.close();
  console.log(`OK without ioredis: ${paid.join(', ')}`);
}
void main();
