import { Etcd3 } from 'etcd3';
import { etcdBackend } from 'nest-locked/etcd';
import { startEtcdCluster } from '../../test/support/etcd-server';
import type { BenchTarget } from './bench-target';

/** Session lease of the raw floor: the lease a process opens once, as the backend's session. */
const FLOOR_LEASE_SECONDS = 10;

/**
 * etcd in the backends bench: one member on 127.0.0.1 (the test harness's), `@Locked` over
 * `etcdBackend`, and the raw floor: a put bound to a lease granted once, then a delete, two
 * round trips (what the backend's uncontended cycle costs at least: its transaction puts the
 * key and reads the line's first holder in the put's round trip).
 */
export const target: BenchTarget = {
  name: 'etcd',
  floor: 'put (bound to a lease granted once) + delete',
  async start() {
    const etcd = await startEtcdCluster(1);
    return {
      definition: () => etcdBackend({ hosts: etcd.hosts }),
      async rawCycle() {
        const client = new Etcd3({ hosts: etcd.hosts });
        const lease = client.lease(FLOOR_LEASE_SECONDS);
        lease.on('lost', () => undefined);
        const id = await lease.grant();
        return {
          async cycle(key: string) {
            await client.kv.put({ key: Buffer.from(key), value: Buffer.from('w'), lease: id });
            await client.kv.deleteRange({ key: Buffer.from(key) });
          },
          async close() {
            await lease.revoke().catch(() => undefined);
            client.close();
          },
        };
      },
      stop: () => etcd.stop(),
    };
  },
};

// The measure the lead asked of each backend engineer, run once by hand:
//   npx ts-node -T bench/backends/etcd.ts --measure
if (require.main === module && process.argv.includes('--measure')) void measure();

async function measure(): Promise<void> {
  const { NestFactory } = await import('@nestjs/core');
  const { Module } = await import('@nestjs/common');
  const { RedlockModule, LockService } = await import('nest-locked');
  const server = await target.start();
  const raw = await server.rawCycle();
  const cycles = 2_000;
  const time = async (fn: (i: number) => Promise<unknown>): Promise<number> => {
    const start = performance.now();
    for (let i = 0; i < cycles; i++) await fn(i);
    return cycles / ((performance.now() - start) / 1000);
  };
  await time(() => raw.cycle('warm'));
  const floor = await time(() => raw.cycle('floor'));
  @Module({ imports: [RedlockModule.forRoot({ backend: server.definition() })] })
  class App {}
  const app = await NestFactory.createApplicationContext(App, { logger: false });
  const locks = app.get(LockService);
  await time(() => locks.using('warm', () => undefined));
  const locked = await time(() => locks.using('uncontended', () => undefined));
  // Hot key: 1 process x 50 callers, 1 ms sections, 20 each.
  const waits: number[] = [];
  const order: number[] = [];
  let overlaps = 0;
  let inside = 0;
  const hotStart = performance.now();
  await Promise.all(
    Array.from({ length: 50 }, async (_, caller) => {
      for (let i = 0; i < 20; i++) {
        const asked = performance.now();
        await locks.using(
          'hot',
          async () => {
            waits.push(performance.now() - asked);
            order.push(caller);
            if (++inside > 1) overlaps++;
            await new Promise((r) => setTimeout(r, 1));
            inside--;
          },
          { waitTimeout: 60_000 },
        );
      }
    }),
  );
  const hotSeconds = (performance.now() - hotStart) / 1000;
  waits.sort((a, b) => a - b);
  const p = (q: number) => waits[Math.min(waits.length - 1, Math.floor(q * waits.length))];
  // FIFO: between two grants of one caller, every other caller was granted once (a full round).
  let fifoBreaks = 0;
  for (let i = 50; i < order.length; i++) if (order[i] !== order[i - 50]) fifoBreaks++;
  console.log(
    JSON.stringify(
      {
        floorCyclesPerSec: Math.round(floor),
        lockedCyclesPerSec: Math.round(locked),
        ratio: Math.round((locked / floor) * 1000) / 1000,
        hot: {
          sectionsPerSec: Math.round(waits.length / hotSeconds),
          p50WaitMs: Math.round(p(0.5) * 10) / 10,
          p99WaitMs: Math.round(p(0.99) * 10) / 10,
          p99TargetMs: 2 * 50 * 1,
          overlaps,
          fifoBreaks,
        },
      },
      null,
      2,
    ),
  );
  await app.close();
  await raw.close();
  await server.stop();
}
