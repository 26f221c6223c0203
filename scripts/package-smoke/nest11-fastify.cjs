// Smoke app for `npm run check:package`: a Nest 11 application on Fastify, plain CommonJS, with
// nest-locked installed from the packed tarball. One HTTP request to a @Locked route.
'use strict';
const assert = require('node:assert/strict');
require('reflect-metadata');
const { Controller, Get, Inject, Module, Param } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { FastifyAdapter } = require('@nestjs/platform-fastify');
const { LockContext, Locked, LockService, RedlockModule } = require('nest-locked');

setTimeout(() => {
  console.error('nest11-fastify: no result within 30 s');
  process.exit(1);
}, 30_000).unref();

/** What TypeScript's __decorate does for a method, in the order decorators are written. */
function decorateMethod(proto, name, decorators) {
  const descriptor = Object.getOwnPropertyDescriptor(proto, name);
  Object.defineProperty(proto, name, Reflect.decorate(decorators, proto, name, descriptor));
}

class ProductsController {
  constructor(locks) {
    this.locks = locks;
  }

  async buy(id) {
    const { keys, fence } = LockContext.current();
    return { id, keys, fence, held: await this.locks.isLocked(keys[0]) };
  }
}
Inject(LockService)(ProductsController, undefined, 0);
Param('id')(ProductsController.prototype, 'buy', 0);
decorateMethod(ProductsController.prototype, 'buy', [Get(':id/buy'), Locked('product:{id}')]);
Controller('products')(ProductsController);

class AppModule {}
Module({
  imports: [RedlockModule.forRoot({ clients: [process.env.REDIS_URL] })],
  controllers: [ProductsController],
})(AppModule);

async function main() {
  const app = await NestFactory.create(AppModule, new FastifyAdapter(), {
    logger: ['error', 'warn'],
  });
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address();
  const res = await fetch(`http://127.0.0.1:${port}/products/42/buy`, {
    signal: AbortSignal.timeout(10_000),
  });
  const body = await res.json();
  assert.equal(res.status, 200, JSON.stringify(body));
  assert.deepEqual(body.keys, ['product:42']);
  assert.equal(body.id, '42');
  assert.equal(body.held, true);
  assert.ok(body.fence > 0);
  assert.equal(await app.get(LockService).isLocked('product:42'), false);
  await app.close();
  const nest = require('@nestjs/core/package.json').version;
  assert.match(nest, /^11\./);
  console.log(`OK: Nest ${nest} on Fastify, GET /products/42/buy -> 200, fence ${body.fence}`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
