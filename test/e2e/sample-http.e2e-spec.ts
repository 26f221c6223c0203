import type { INestApplication } from '@nestjs/common';
import { LockService } from 'nest-locked';
import request from 'supertest';
import { TickJob } from '../../sample/jobs/tick.job';
import { ProductsRepository } from '../../sample/products/products.repository';
import { type RedisServerHandle, startRedisServer } from '../support/redis-server';
import { createSampleApp, tempDir } from './support/sample-app';

/**
 * The sample app in one process, over HTTP (supertest): every endpoint's success and error
 * answers, including lock contention mapped by the library's interceptor.
 */
describe('sample app over HTTP (in-process)', () => {
  let redis: RedisServerHandle;
  let app: INestApplication;
  let locks: LockService;
  let dir: ReturnType<typeof tempDir>;
  const http = () => request(app.getHttpServer());

  beforeAll(async () => {
    redis = await startRedisServer();
    dir = tempDir('e2e-http');
    app = await createSampleApp({
      REDIS_URL: redis.url,
      SAMPLE_DB_PATH: `${dir.path}/shop.sqlite`,
      SAMPLE_DB_LATENCY_MS: '1',
      // Short, so "busy past its wait" answers quickly.
      SAMPLE_LOCK_WAIT_MS: '300',
      SAMPLE_INSTANCE: 'in-process',
      // Long enough that requests sent together are at the gateway together.
      SAMPLE_GATEWAY_LATENCY_MS: '50',
    });
    locks = app.get(LockService);
  });

  afterAll(async () => {
    await app?.close();
    await redis?.stop();
    dir?.remove();
  });

  const createProduct = async (stock: number): Promise<number> => {
    const res = await http().post('/products').send({ name: 'phone', stock }).expect(201);
    return res.body.id as number;
  };

  it('GET /health answers 200 with the instance name', async () => {
    const res = await http().get('/health').expect(200);
    expect(res.body).toMatchObject({ status: 'ok', instance: 'in-process' });
  });

  describe('products', () => {
    it('POST /products creates a product (201)', async () => {
      const res = await http().post('/products').send({ name: 'phone', stock: 5 }).expect(201);
      expect(res.body).toEqual({ id: expect.any(Number), name: 'phone', stock: 5, price: 100 });
    });

    it('POST /products with an id sets the stock of that product (200), 404 for an unknown id', async () => {
      const id = await createProduct(1);
      const res = await http().post('/products').send({ id, stock: 7 }).expect(200);
      expect(res.body).toMatchObject({ id, stock: 7 });
      await http().post('/products').send({ id: 999_999, stock: 7 }).expect(404);
    });

    it.each([
      [{ stock: -1 }, /stock must be an integer >= 0, got -1/],
      [{ stock: 1.5 }, /stock must be an integer/],
      [{ stock: 'lots' }, /stock must be an integer/],
      [{}, /stock must be an integer >= 0, got nothing/],
      [{ stock: 1, name: '' }, /name must be a non-empty string/],
      [{ stock: 1, id: 0 }, /id must be an integer/],
    ])('POST /products %j answers 400', async (body, message) => {
      const res = await http().post('/products').send(body).expect(400);
      expect(res.body.message).toMatch(message);
    });

    it('POST /products with a body that is not an object answers 400', async () => {
      await http().post('/products').send([1, 2]).expect(400);
    });

    it('GET /products/:id answers 200 with price, stock and sales under a read lock, 404 unknown, 400 not a number', async () => {
      const id = await createProduct(3);
      const res = await http().get(`/products/${id}`).expect(200);
      expect(res.body).toEqual({
        id,
        name: 'phone',
        stock: 3,
        price: 100,
        sold: 0,
        orders: 0,
        slices: [1, 1, 1, 0, 0, 0, 0, 0, 0, 0],
        stockVersion: 0,
        priceVersion: 0,
        torn: false,
        lock: 'read',
        fence: expect.any(Number),
      });
      await http().get('/products/999999').expect(404);
      await http().get('/products/abc').expect(400);
    });

    it('GET /products/:id?lock=write|none reads the same pair under the exclusive lock or none', async () => {
      const id = await createProduct(3);
      const exclusive = await http().get(`/products/${id}?lock=write`).expect(200);
      expect(exclusive.body).toMatchObject({ stock: 3, lock: 'write', fence: expect.any(Number) });
      const unlocked = await http().get(`/products/${id}?lock=none`).expect(200);
      expect(unlocked.body).toMatchObject({ stock: 3, lock: 'none', torn: false });
      expect(unlocked.body.fence).toBeUndefined();
      const bad = await http().get(`/products/${id}?lock=shared`).expect(400);
      expect(bad.body.message).toMatch(/lock must be one of read, write, none, got "shared"/);
    });
  });

  describe('POST /products/:id/restock and read locks', () => {
    it("writes stock and price with one version, the write lock's fence (200)", async () => {
      const id = await createProduct(3);
      const res = await http()
        .post(`/products/${id}/restock`)
        .send({ stock: 40, price: 250 })
        .expect(200);
      expect(res.body).toEqual({
        id,
        stock: 40,
        price: 250,
        version: res.body.fence,
        lock: 'write',
        fence: expect.any(Number),
      });
      const view = await http().get(`/products/${id}`).expect(200);
      expect(view.body).toMatchObject({
        stock: 40,
        price: 250,
        stockVersion: res.body.fence,
        priceVersion: res.body.fence,
        torn: false,
      });
      // A reader holds the key's current fence: at least the last writer's (the version it
      // reads), below the next writer's.
      expect(view.body.fence).toBeGreaterThanOrEqual(res.body.fence);
      const next = await http().post(`/products/${id}/restock`).send({ stock: 1, price: 1 });
      expect(next.body.fence).toBeGreaterThan(view.body.fence);
      expect(view.body.slices.reduce((a: number, b: number) => a + b, 0)).toBe(40);
    });

    it('?lock=none restocks without a lock (200, the next version, no fence)', async () => {
      const id = await createProduct(3);
      const res = await http()
        .post(`/products/${id}/restock?lock=none`)
        .send({ stock: 5, price: 90 })
        .expect(200);
      expect(res.body).toEqual({ id, stock: 5, price: 90, version: 1, lock: 'none' });
    });

    it.each([
      [{ price: 10 }, /stock must be an integer >= 0, got nothing/],
      [{ stock: 1 }, /price must be an integer >= 0, got nothing/],
      [{ stock: 1, price: -1 }, /price must be an integer >= 0, got -1/],
    ])('POST /products/:id/restock %j answers 400', async (body, message) => {
      const id = await createProduct(1);
      const res = await http().post(`/products/${id}/restock`).send(body).expect(400);
      expect(res.body.message).toMatch(message);
    });

    it('answers 404 for an unknown product and 400 for an unknown lock', async () => {
      await http().post('/products/999999/restock').send({ stock: 1, price: 1 }).expect(404);
      const id = await createProduct(1);
      const res = await http()
        .post(`/products/${id}/restock?lock=read`)
        .send({ stock: 1, price: 1 })
        .expect(400);
      expect(res.body.message).toMatch(/lock must be one of write, none, got "read"/);
    });

    it('readers share the product while a read hold is held; a restock waits and answers 409', async () => {
      const id = await createProduct(3);
      const held = await locks.acquire(`product:${id}`, { mode: 'read', ttl: 5_000 });
      try {
        const read = await http().get(`/products/${id}`).expect(200);
        expect(read.body).toMatchObject({ stock: 3, lock: 'read' });
        const res = await http()
          .post(`/products/${id}/restock`)
          .send({ stock: 9, price: 1 })
          .expect(409);
        expect(res.headers['retry-after']).toMatch(/^\d+$/);
        expect(res.body.code).toBe('LOCK_NOT_ACQUIRED');
      } finally {
        await held.release();
      }
      const view = await http().get(`/products/${id}`).expect(200);
      expect(view.body).toMatchObject({ stock: 3, price: 100, stockVersion: 0 });
    });

    it('a read waits for a restock in progress and sees all of it, never half', async () => {
      const id = await createProduct(3);
      const restock = http().post(`/products/${id}/restock`).send({ stock: 7, price: 321 });
      const restocked = restock.then((r) => r);
      // The restock is between its two writes for the database round trip (1 ms here) at most;
      // reads sent meanwhile wait for its write lock.
      const reads = await Promise.all(
        Array.from({ length: 5 }, () => http().get(`/products/${id}`)),
      );
      expect((await restocked).status).toBe(200);
      for (const r of reads) {
        expect(r.status).toBe(200);
        expect(r.body.torn).toBe(false);
        expect([100, 321]).toContain(r.body.price);
      }
    });
  });

  describe('POST /products/:id/purchase', () => {
    it('mode=product sells under the lock (201) with its fence', async () => {
      const id = await createProduct(3);
      const res = await http()
        .post(`/products/${id}/purchase?mode=product`)
        .send({ quantity: 2 })
        .expect(201);
      expect(res.body).toMatchObject({
        productId: id,
        quantity: 2,
        remaining: 1,
        mode: 'product',
        instance: 'in-process',
        fence: expect.any(Number),
      });
      const view = await http().get(`/products/${id}`).expect(200);
      expect(view.body).toMatchObject({ stock: 1, sold: 2, orders: 1 });
    });

    it('mode=fenced sells under the lock (201) and writes the stock with its fence', async () => {
      const id = await createProduct(3);
      const res = await http()
        .post(`/products/${id}/purchase?mode=fenced`)
        .send({ quantity: 2 })
        .expect(201);
      expect(res.body).toMatchObject({ productId: id, remaining: 1, mode: 'fenced' });
      const view = await http().get(`/products/${id}`).expect(200);
      expect(view.body).toMatchObject({ stock: 1, sold: 2, orders: 1 });
      // The next holder's fence is larger, so its write lands.
      await http().post(`/products/${id}/purchase?mode=fenced`).send({}).expect(201);
    });

    it('mode=fenced sells nothing when a newer fence wrote the stock (409 STALE_FENCE)', async () => {
      const id = await createProduct(5);
      // As if a holder with a newer fence had written while this buyer's lock was lost.
      const products = app.get(ProductsRepository);
      expect(products.writeStockFenced(id, 4, Number.MAX_SAFE_INTEGER)).toBe(true);
      const res = await http().post(`/products/${id}/purchase?mode=fenced`).send({}).expect(409);
      expect(res.body).toMatchObject({ code: 'STALE_FENCE', productId: id });
      expect(res.body.fence).toBeLessThan(Number.MAX_SAFE_INTEGER);
      const view = await http().get(`/products/${id}`).expect(200);
      expect(view.body).toMatchObject({ stock: 4, sold: 0, orders: 0 });
      expect(products.writeStockFenced(id, 3, res.body.fence as number)).toBe(false);
    });

    it('mode=none sells without a lock (201, no fence)', async () => {
      const id = await createProduct(3);
      const res = await http().post(`/products/${id}/purchase?mode=none`).send({}).expect(201);
      expect(res.body).toMatchObject({ productId: id, quantity: 1, remaining: 2, mode: 'none' });
      expect(res.body.fence).toBeUndefined();
    });

    it('without ?mode it locks per product, and quantity defaults to 1', async () => {
      const id = await createProduct(3);
      const res = await http().post(`/products/${id}/purchase`).expect(201);
      expect(res.body).toMatchObject({ mode: 'product', quantity: 1, remaining: 2 });
    });

    it.each(['none', 'product'])(
      'mode=%s answers 409 with the remaining stock when it cannot cover the quantity',
      async (mode) => {
        const id = await createProduct(2);
        const res = await http()
          .post(`/products/${id}/purchase?mode=${mode}`)
          .send({ quantity: 3 })
          .expect(409);
        expect(res.body).toMatchObject({
          code: 'INSUFFICIENT_STOCK',
          remaining: 2,
          requested: 3,
          message: expect.stringMatching(/insufficient stock/),
        });
      },
    );

    it.each([0, -1, 1.5, 'two', 2_000_000])('quantity %p answers 400', async (quantity) => {
      const id = await createProduct(5);
      const res = await http()
        .post(`/products/${id}/purchase?mode=product`)
        .send({ quantity })
        .expect(400);
      expect(res.body.message).toMatch(/quantity must be an integer from 1 to 1000000/);
    });

    it('an unknown mode answers 400 naming the modes', async () => {
      const id = await createProduct(5);
      const res = await http().post(`/products/${id}/purchase?mode=fast`).send({}).expect(400);
      expect(res.body.message).toMatch(/mode must be one of none, product, segmented, fenced/);
    });

    it.each(['none', 'product', 'segmented', 'fenced'])(
      'mode=%s on an unknown product answers 404',
      async (mode) => {
        await http().post(`/products/999999/purchase?mode=${mode}`).send({}).expect(404);
      },
    );

    it('a product id that is not a number answers 400', async () => {
      await http().post('/products/abc/purchase').send({}).expect(400);
    });

    it('mode=segmented sells from one slice (201) with the fence of that slice', async () => {
      const id = await createProduct(20);
      const res = await http()
        .post(`/products/${id}/purchase?mode=segmented`)
        .send({ quantity: 2 })
        .expect(201);
      expect(res.body).toMatchObject({
        productId: id,
        quantity: 2,
        remaining: 18,
        mode: 'segmented',
        fence: expect.any(Number),
      });
      const view = await http().get(`/products/${id}`).expect(200);
      expect(view.body.stock).toBe(18);
      expect(view.body.slices.reduce((a: number, b: number) => a + b, 0)).toBe(18);
      expect([...view.body.slices].sort()).toEqual([0, 2, 2, 2, 2, 2, 2, 2, 2, 2]);
    });

    it('mode=segmented takes a quantity no single slice has from several slices (201)', async () => {
      const id = await createProduct(10); // ten slices of 1
      const res = await http()
        .post(`/products/${id}/purchase?mode=segmented`)
        .send({ quantity: 3 })
        .expect(201);
      expect(res.body).toMatchObject({ quantity: 3, remaining: 7, mode: 'segmented' });
      const view = await http().get(`/products/${id}`).expect(200);
      expect(view.body).toMatchObject({ stock: 7, slices: [0, 0, 0, 1, 1, 1, 1, 1, 1, 1] });
    });

    it('mode=segmented answers 409 with the stock when the product cannot cover the quantity', async () => {
      const id = await createProduct(4);
      const res = await http()
        .post(`/products/${id}/purchase?mode=segmented`)
        .send({ quantity: 5 })
        .expect(409);
      expect(res.body).toMatchObject({ code: 'INSUFFICIENT_STOCK', remaining: 4, requested: 5 });
    });

    it('mode=segmented sells again at once after a restock of a sold-out product', async () => {
      const id = await createProduct(2);
      await http()
        .post(`/products/${id}/purchase?mode=segmented`)
        .send({ quantity: 2 })
        .expect(201);
      await http().post(`/products/${id}/purchase?mode=segmented`).send({}).expect(409);
      await http().post('/products').send({ id, stock: 3 }).expect(200);
      const res = await http().post(`/products/${id}/purchase?mode=segmented`).send({}).expect(201);
      expect(res.body.remaining).toBe(2);
    });

    it('mode=segmented answers 409 with Retry-After while every slice stays locked', async () => {
      const id = await createProduct(10);
      const keys = Array.from({ length: 10 }, (_, s) => `stock:${id}:seg:${s}`);
      const held = await locks.acquire(keys, { ttl: 5_000 });
      try {
        const res = await http()
          .post(`/products/${id}/purchase?mode=segmented`)
          .send({})
          .expect(409);
        expect(res.headers['retry-after']).toMatch(/^\d+$/);
        expect(res.body.code).toBe('LOCK_NOT_ACQUIRED');
      } finally {
        await held.release();
      }
    });

    it('answers 409 with Retry-After when the product stays locked past the wait, and sells nothing', async () => {
      const id = await createProduct(5);
      const held = await locks.acquire(`product:${id}`, { ttl: 5_000 });
      try {
        const res = await http()
          .post(`/products/${id}/purchase?mode=product`)
          .send({ quantity: 1 })
          .expect(409);
        expect(res.headers['retry-after']).toMatch(/^\d+$/);
        expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
        expect(res.body).toMatchObject({
          code: 'LOCK_NOT_ACQUIRED',
          error: 'Conflict',
          message: 'The resource is busy; retry later.',
        });
        expect(JSON.stringify(res.body)).not.toContain('product:');
      } finally {
        await held.release();
      }
      const view = await http().get(`/products/${id}`).expect(200);
      expect(view.body).toMatchObject({ stock: 5, sold: 0 });
      await http().post(`/products/${id}/purchase?mode=product`).send({}).expect(201);
    });
  });

  it('answers 503 when Redis cannot be reached (LockBackendError), never a hang', async () => {
    const down = tempDir('e2e-down');
    // Nothing listens on port 1 of the loopback interface.
    const offline = await createSampleApp({
      REDIS_URL: 'redis://127.0.0.1:1',
      SAMPLE_DB_PATH: `${down.path}/shop.sqlite`,
    });
    try {
      const server = offline.getHttpServer();
      const product = await request(server).post('/products').send({ stock: 1 }).expect(201);
      const res = await request(server)
        .post(`/products/${product.body.id}/purchase?mode=product`)
        .send({})
        .expect(503);
      expect(res.body).toMatchObject({
        code: 'LOCK_BACKEND_UNAVAILABLE',
        error: 'Service Unavailable',
        message: 'The service is temporarily unavailable.',
      });
      // Neither the lock key nor the driver's words (ECONNREFUSED, offline queue...).
      expect(JSON.stringify(res.body)).not.toMatch(/product:|ECONNREFUSED|Redis|offline/i);
    } finally {
      await offline.close();
      down.remove();
    }
  });

  describe('accounts', () => {
    const account = (id: string, balance: number) =>
      http().post('/accounts').send({ id, balance }).expect(201);

    it('POST /accounts creates an account or sets its balance (201); GET reads it', async () => {
      await account('alice', 100);
      await account('alice', 150);
      const res = await http().get('/accounts/alice').expect(200);
      expect(res.body).toEqual({ id: 'alice', balance: 150 });
    });

    it.each([
      [{ id: 'a b', balance: 1 }, /id must be 1 to 64 letters/],
      [{ id: 'x', balance: -5 }, /balance must be an integer >= 0/],
      [{ balance: 5 }, /id must be/],
    ])('POST /accounts %j answers 400', async (body, message) => {
      const res = await http().post('/accounts').send(body).expect(400);
      expect(res.body.message).toMatch(message);
    });

    it('GET /accounts/:id answers 404 for an unknown account and 400 for a bad id', async () => {
      await http().get('/accounts/nobody').expect(404);
      await http()
        .get(`/accounts/${'x'.repeat(65)}`)
        .expect(400);
    });

    it('POST /accounts/transfer moves money under both account locks (200)', async () => {
      await account('t-from', 100);
      await account('t-to', 10);
      const res = await http()
        .post('/accounts/transfer')
        .send({ from: 't-from', to: 't-to', amount: 30 })
        .expect(200);
      expect(res.body).toMatchObject({
        from: { id: 't-from', balance: 70 },
        to: { id: 't-to', balance: 40 },
        amount: 30,
        fences: { 'account:t-from': expect.any(Number), 'account:t-to': expect.any(Number) },
      });
    });

    it.each([
      [{ from: 'same', to: 'same', amount: 1 }, /different accounts/],
      [{ from: 'a1', to: 'a2', amount: 0 }, /amount must be an integer >= 1/],
      [{ from: 'a1', amount: 1 }, /to must be/],
      [{ from: 'a1', to: 'a2', amount: '1e3' }, /amount must be an integer/],
    ])('POST /accounts/transfer %j answers 400', async (body, message) => {
      const res = await http().post('/accounts/transfer').send(body).expect(400);
      expect(res.body.message).toMatch(message);
    });

    it('a transfer naming an unknown account answers 404', async () => {
      await account('known', 10);
      await http()
        .post('/accounts/transfer')
        .send({ from: 'known', to: 'unknown', amount: 1 })
        .expect(404);
      await http()
        .post('/accounts/transfer')
        .send({ from: 'unknown', to: 'known', amount: 1 })
        .expect(404);
    });

    it('a transfer the balance cannot cover answers 409 with the balance', async () => {
      await account('poor', 5);
      await account('rich', 5);
      const res = await http()
        .post('/accounts/transfer')
        .send({ from: 'poor', to: 'rich', amount: 6 })
        .expect(409);
      expect(res.body).toMatchObject({ code: 'INSUFFICIENT_FUNDS', balance: 5, requested: 6 });
    });

    it('answers 409 with Retry-After while one of the accounts stays locked', async () => {
      await account('busy-a', 10);
      await account('busy-b', 10);
      const held = await locks.acquire('account:busy-b', { ttl: 5_000 });
      try {
        const res = await http()
          .post('/accounts/transfer')
          .send({ from: 'busy-a', to: 'busy-b', amount: 1 })
          .expect(409);
        expect(res.headers['retry-after']).toMatch(/^\d+$/);
        expect(res.body.code).toBe('LOCK_NOT_ACQUIRED');
      } finally {
        await held.release();
      }
      const a = await http().get('/accounts/busy-a').expect(200);
      expect(a.body.balance).toBe(10);
    });
  });

  describe('POST /orders/:id/pay', () => {
    /** A product at `price` and an order of `quantity` of it: the order's id. */
    const order = async (price = 250, quantity = 2): Promise<number> => {
      const product = await http().post('/products').send({ stock: 100, price }).expect(201);
      const res = await http()
        .post(`/products/${product.body.id}/purchase`)
        .send({ quantity })
        .expect(201);
      return res.body.orderId as number;
    };
    const orders = (n: number) => Promise.all(Array.from({ length: n }, () => order()));
    const gateway = async () => (await http().get('/gateway/stats').expect(200)).body;

    beforeEach(async () => {
      await http().post('/gateway/stats/reset').expect(200);
    });

    it('pays under one of 3 permits (200); GET /orders/:id shows the order paid', async () => {
      const id = await order(250, 2);
      const res = await http().post(`/orders/${id}/pay`).expect(200);
      expect(res.body).toEqual({
        orderId: id,
        paymentId: expect.stringMatching(/^pay_/),
        amount: 500,
        lock: 'permits',
        instance: 'in-process',
        inFlight: 1,
        fence: expect.any(Number),
        permits: 3,
      });
      const stored = await http().get(`/orders/${id}`).expect(200);
      expect(stored.body).toMatchObject({
        id,
        amount: 500,
        paymentState: 'paid',
        paymentId: res.body.paymentId,
        paidAt: expect.any(Number),
      });
      expect(await gateway()).toEqual({
        limit: 3,
        calls: 1,
        refused: 0,
        maxInFlight: 1,
        inFlight: 0,
      });
    });

    it('an order paid already answers 409 ALREADY_PAID without calling the gateway again', async () => {
      const id = await order();
      await http().post(`/orders/${id}/pay`).expect(200);
      const again = await http().post(`/orders/${id}/pay?lock=none`).expect(409);
      expect(again.body).toMatchObject({ code: 'ALREADY_PAID', orderId: id });
      expect((await gateway()).calls).toBe(1);
    });

    it('answers 404 for an unknown order, 400 for an unknown lock or an id not a number', async () => {
      await http().post('/orders/999999/pay').expect(404);
      await http().get('/orders/999999').expect(404);
      await http().post('/orders/abc/pay').expect(400);
      const id = await order();
      const res = await http().post(`/orders/${id}/pay?lock=mutex`).expect(400);
      expect(res.body.message).toMatch(/lock must be one of permits, none, got "mutex"/);
    });

    it('ten payments at once under permits: all paid, at most 3 at the gateway, none refused', async () => {
      const ids = await orders(10);
      const paid = await Promise.all(ids.map((id) => http().post(`/orders/${id}/pay`)));
      expect(paid.map((r) => r.status)).toEqual(ids.map(() => 200));
      expect(Math.max(...paid.map((r) => r.body.inFlight as number))).toBeLessThanOrEqual(3);
      const stats = await gateway();
      expect(stats).toMatchObject({ calls: 10, refused: 0, inFlight: 0 });
      // The permits are used: three calls at once, not one.
      expect(stats.maxInFlight).toBe(3);
    });

    it('ten at once without permits: the gateway refuses some (503), their orders stay payable', async () => {
      const ids = await orders(10);
      const results = await Promise.all(
        ids.map((id) => http().post(`/orders/${id}/pay?lock=none`)),
      );
      const refused = results.filter((r) => r.status === 503);
      expect(results.every((r) => r.status === 200 || r.status === 503)).toBe(true);
      expect(refused.length).toBeGreaterThan(0);
      expect(refused[0].body).toMatchObject({ code: 'PAYMENT_GATEWAY_BUSY', limit: 3 });
      const stats = await gateway();
      expect(stats.refused).toBe(refused.length);
      expect(stats.maxInFlight).toBeGreaterThan(3);
      const again = refused[0].body.orderId as number;
      expect((await http().get(`/orders/${again}`).expect(200)).body.paymentState).toBeNull();
      await http().post(`/orders/${again}/pay`).expect(200);
    });

    it('answers 409 with Retry-After while all 3 permits are held elsewhere; nothing is charged', async () => {
      const id = await order();
      const held = await Promise.all(
        [0, 1, 2].map(() => locks.acquire('gateway:payments', { permits: 3, ttl: 5_000 })),
      );
      try {
        const res = await http().post(`/orders/${id}/pay`).expect(409);
        expect(res.headers['retry-after']).toMatch(/^\d+$/);
        expect(res.body.code).toBe('LOCK_NOT_ACQUIRED');
      } finally {
        await Promise.all(held.map((h) => h.release()));
      }
      expect((await gateway()).calls).toBe(0);
      expect((await http().get(`/orders/${id}`).expect(200)).body.paymentState).toBeNull();
      await http().post(`/orders/${id}/pay`).expect(200);
    });
  });

  describe('reports', () => {
    it('POST /reports/:id holds its lock past its 1 s lease (watchdog) and returns the fence (200)', async () => {
      const res = await http().post('/reports/r-long').send({ durationMs: 1_600 }).expect(200);
      expect(res.body).toMatchObject({
        id: 'r-long',
        fence: expect.any(Number),
        ttl: 1_000,
        outlivedLease: true,
        lost: false,
        fencedOut: false,
        status: 'done',
        progress: 100,
      });
      expect(res.body.heldMs).toBeGreaterThan(1_000);
      const stored = await http().get('/reports/r-long').expect(200);
      expect(stored.body).toMatchObject({ fence: res.body.fence, status: 'done' });
    });

    it('a second build of the same report while one runs answers 409 with Retry-After', async () => {
      const first = http().post('/reports/r-busy').send({ durationMs: 1_500 });
      const running = first.then((r) => r);
      // Past the 1 s lease: only the watchdog keeps the first build's lock.
      await new Promise((r) => setTimeout(r, 1_200));
      const second = await http().post('/reports/r-busy').send({ durationMs: 100 }).expect(409);
      expect(second.headers['retry-after']).toMatch(/^\d+$/);
      expect(second.body.code).toBe('LOCK_NOT_ACQUIRED');
      expect((await running).status).toBe(200);
    });

    it.each([
      [{ durationMs: 0 }, /durationMs must be an integer from 1 to 60000/],
      [{ durationMs: 'long' }, /durationMs must be an integer/],
    ])('POST /reports/:id %j answers 400', async (body, message) => {
      const res = await http().post('/reports/r-bad').send(body).expect(400);
      expect(res.body.message).toMatch(message);
    });

    it('a report id with characters outside [A-Za-z0-9_-] answers 400', async () => {
      await http().post('/reports/bad%20id').send({}).expect(400);
    });

    it('GET /reports/:id answers 404 for a report never built, 400 for a bad id', async () => {
      await http().get('/reports/never').expect(404);
      await http().get('/reports/bad%20id').expect(400);
    });
  });

  describe('tick job', () => {
    it('runs a tick once: the same or an older tick is skipped, a newer one runs with a larger fence', async () => {
      const job = app.get(TickJob);
      const first = await job.runOnce('e2e-job', 10_000);
      expect(first).toMatchObject({ ran: true, tick: 10_000 });
      await expect(job.runOnce('e2e-job', 10_000)).resolves.toEqual({
        ran: false,
        tick: 10_000,
        reason: 'done',
      });
      await expect(job.runOnce('e2e-job', 9_000)).resolves.toMatchObject({ ran: false });
      const next = await job.runOnce('e2e-job', 11_000);
      expect(next).toMatchObject({ ran: true, tick: 11_000 });
      expect(next!.ran && first!.ran && next!.fence > first!.fence).toBe(true);
    });

    it('skips quietly (resolves undefined) while another instance holds the job', async () => {
      const job = app.get(TickJob);
      const held = await locks.acquire('cron:e2e-busy', { ttl: 5_000 });
      try {
        await expect(job.runOnce('e2e-busy', 20_000)).resolves.toBeUndefined();
      } finally {
        await held.release();
      }
      await expect(job.runOnce('e2e-busy', 20_000)).resolves.toMatchObject({ ran: true });
    });
  });
});
