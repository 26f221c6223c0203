// Smoke app for `npm run check:package`: a Nest 12 application written as plain Node ESM
// ("type": "module", no TypeScript, no bundler), with nest-locked installed from the packed
// tarball. nest-locked is CommonJS and require()s Nest 12, which is ESM only: this is the
// combination that needs Node's require(esm) (Node ^20.19 or >= 22.12). The optional peers
// come in their Nest 12 majors, installed without --legacy-peer-deps: health through
// @nestjs/terminus, lock events through @nestjs/event-emitter.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { EventEmitter2, EventEmitterModule } from '@nestjs/event-emitter';
import { HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { LockContext, Locked, LockService, RedlockModule } from 'nest-locked';
import { RedlockHealthIndicator, RedlockHealthModule } from 'nest-locked/health';

setTimeout(() => {
  console.error('nest12-esm: no result within 30 s');
  process.exit(1);
}, 30_000).unref();

/** What TypeScript's __decorate does for a method, in the order decorators are written. */
function decorateMethod(proto, name, decorators) {
  const descriptor = Object.getOwnPropertyDescriptor(proto, name);
  Object.defineProperty(proto, name, Reflect.decorate(decorators, proto, name, descriptor));
}

class Shop {
  async purchase(id, qty) {
    const { keys, fence } = LockContext.current();
    return { keys, fence, qty };
  }
}
decorateMethod(Shop.prototype, 'purchase', [Locked('product:{id}')]);
Injectable()(Shop);

class AppModule {}
Module({
  imports: [
    RedlockModule.forRoot({ clients: [process.env.REDIS_URL] }),
    EventEmitterModule.forRoot(),
    TerminusModule,
    RedlockHealthModule,
  ],
  providers: [Shop],
})(AppModule);

const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
const acquired = [];
app.get(EventEmitter2).on('nest-locked.acquired', (event) => acquired.push(event.fence));
const shop = app.get(Shop);
const [a, b] = await Promise.all([shop.purchase(42, 1), shop.purchase(42, 2)]);
assert.deepEqual(a.keys, ['product:42']);
assert.ok(a.fence > 0 && b.fence > 0 && a.fence !== b.fence, `fences ${a.fence}, ${b.fence}`);
assert.equal(await app.get(LockService).isLocked('product:42'), false);
assert.deepEqual(acquired.sort(), [a.fence, b.fence].sort(), 'nest-locked.acquired events');
const redlock = app.get(RedlockHealthIndicator);
const health = await app.get(HealthCheckService).check([() => redlock.isHealthy('redlock')]);
assert.equal(health.status, 'ok', JSON.stringify(health));
await app.close();

const version = (name) => createRequire(import.meta.url)(`${name}/package.json`).version;
const nest = version('@nestjs/core');
assert.match(nest, /^12\./);
console.log(
  `OK: Nest ${nest} ESM app on Node ${process.versions.node}, fences ${a.fence} ${b.fence}, ` +
    `health ${health.info.redlock.status} (@nestjs/terminus ${version('@nestjs/terminus')}), ` +
    `${acquired.length} acquired events (@nestjs/event-emitter ${version('@nestjs/event-emitter')})`,
);
