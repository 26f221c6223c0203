// Smoke app for `npm run check:package`: a PostgreSQL-only app installed without ioredis. Its
// types compile without ioredis (tsc without skipLibCheck), and it starts and locks on the
// PostgreSQL that check:package started (PG_URL).
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

const url = process.env.PG_URL;
assert.ok(url, 'no-ioredis: PG_URL (the PostgreSQL check:package started) is not set');
/** What a PostgreSQL-only app configures. */
const onPostgres: RedlockModuleOptions = { backend: postgresBackend({ connectionString: url }) };
/** The Redis option types stay checked without ioredis: a URL and options. */
export const redisNodes: RedlockClientEntry[] = ['redis://127.0.0.1:6379', { host: 'h', port: 1 }];

@Injectable()
class Orders {
  @Locked('order:{0}')
  async pay(id: string): Promise<string> {
    return `${id}: fence ${LockContext.current()!.fence}`;
  }
}

@Module({ imports: [RedlockModule.forRoot(onPostgres)], providers: [Orders] })
class AppModule {}

async function main(): Promise<void> {
  assert.throws(() => require.resolve('ioredis'), /Cannot find module 'ioredis'/);
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  await app.init();
  const paid = [await app.get(Orders).pay('1'), await app.get(Orders).pay('1')];
  const fences = paid.map((p) => Number(p.split('fence ')[1]));
  assert.ok(fences[1] > fences[0], `fences must rise: ${paid.join(', ')}`);
  assert.equal(app.get(LockService).stats().subscriptions, 0);
  await app.close();
  console.log(`OK without ioredis, on PostgreSQL: ${paid.join(', ')}`);
}
void main();
