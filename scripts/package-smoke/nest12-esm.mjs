// Smoke app for `npm run check:package`: a Nest 12 application written as plain Node ESM
// ("type": "module", no TypeScript, no bundler), with nest-locked installed from the packed
// tarball. nest-locked is CommonJS and require()s Nest 12, which is ESM only: this is the
// combination that needs Node's require(esm) (Node ^20.19 or >= 22.12).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockContext, Locked, LockService, RedlockModule } from 'nest-locked';

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
  imports: [RedlockModule.forRoot({ clients: [process.env.REDIS_URL] })],
  providers: [Shop],
})(AppModule);

const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
const shop = app.get(Shop);
const [a, b] = await Promise.all([shop.purchase(42, 1), shop.purchase(42, 2)]);
assert.deepEqual(a.keys, ['product:42']);
assert.ok(a.fence > 0 && b.fence > 0 && a.fence !== b.fence, `fences ${a.fence}, ${b.fence}`);
assert.equal(await app.get(LockService).isLocked('product:42'), false);
await app.close();

const nest = createRequire(import.meta.url)('@nestjs/core/package.json').version;
assert.match(nest, /^12\./);
console.log(`OK: Nest ${nest} ESM app on Node ${process.versions.node}, fences ${a.fence} ${b.fence}`);
