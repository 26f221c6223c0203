/**
 * The memory lock-order checking keeps per class pair (PRODUCT 2.11): N nestings of two classes
 * each never seen before (`i<i>:{id}` inside `o<i>:{id}`, named with `lockClass`) through
 * `LockService.using` on the memory backend, the heap measured after a full GC before and after,
 * with the checker on (`'warn'`) and off; the difference over N is what one pair costs: its two
 * classes, its edge with its first site, and the two held chains that lead to it.
 */
import 'reflect-metadata';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { LockService, RedlockModule } from 'nest-locked';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Heap in use after a full collection. */
function heap(): number {
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

async function bytesFor(pairs: number, lockOrder: 'warn' | 'off'): Promise<number> {
  @Module({ imports: [RedlockModule.forRoot({ backend: 'memory', lockOrder })] })
  class MemoryModule {}
  const app = await NestFactory.createApplicationContext(MemoryModule, { logger: false });
  const locks = app.get(LockService);
  // Warm: the paths compiled and the maps of the first classes grown before the first sample.
  for (let i = 0; i < 100; i++) await locks.using(`w:${i}`, () => locks.using(`x:${i}`, () => 0));
  const before = heap();
  for (let i = 0; i < pairs; i++) {
    await locks.using(`o:${i}`, () => locks.using(`i:${i}`, () => 0, { lockClass: `i${i}:{id}` }), {
      lockClass: `o${i}:{id}`,
    });
  }
  const after = heap();
  await app.close();
  return after - before;
}

export interface LockOrderMemory {
  pairs: number;
  /** Heap per pair with the checker on, off, and the difference (bytes). */
  on: number;
  off: number;
  perPair: number;
}

/** Measures with `pairs` class pairs (20,000 by default: a few MiB). */
export async function measureLockOrderMemory(pairs = 20_000): Promise<LockOrderMemory> {
  const off = (await bytesFor(pairs, 'off')) / pairs;
  const on = (await bytesFor(pairs, 'warn')) / pairs;
  return { pairs, on, off, perPair: on - off };
}

if (require.main === module) {
  void measureLockOrderMemory().then((m) => console.log(JSON.stringify(m)));
}
