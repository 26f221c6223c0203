/**
 * Where an uncontended ZooKeeper lock spends its time beyond the raw floor, step by step, on one
 * ZooKeeper 3.8 member started by the test harness:
 *   node dist-apps/bench/zookeeper-breakdown.js [rounds] [cycles]
 * (after `npm run build && npm run build:apps`). Each step adds one thing to the one before:
 * - floor: create EPHEMERAL + delete (the bench's raw floor);
 * - sequential: the node EPHEMERAL_SEQUENTIAL under a key's parent, as the recipe names it;
 * - recipe: that create in one multi with a setData on the parent (what gives the fence and
 *   tells a free key in one round trip) + delete: the least one lock of the recipe sends;
 * - backend: `ZooKeeperLockBackend` acquire + release (the engine alone, no Nest);
 * - locked: `@Locked` through Nest, as in `npm run bench -- --only backends`.
 * Rounds are interleaved (drift hits every step alike). Per step: cycles/s (median of rounds),
 * its median per-round ratio to the floor, the requests the server got per cycle (`cons`), and
 * the CPU per cycle of this process and of ZooKeeper's JVM (/proc).
 */
import 'reflect-metadata';
import * as fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import { Injectable, Logger, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { CreateMode } from 'node-zookeeper-client';
import { Locked, RedlockModule } from 'nest-locked';
import { zookeeperBackend } from 'nest-locked/zookeeper';
import { fourLetterWord, startZooKeeper } from '../test/support/zookeeper-server';
import { median } from './stats';
import { connectZooKeeper, zkCall as call } from './zookeeper-client';

@Injectable()
class Calls {
  @Locked('u', { waitTimeout: 60_000 })
  async cycle(): Promise<void> {}
}

const EMPTY = Buffer.alloc(0);

/** utime + stime of a process, in µs (/proc/<pid>/stat, clock ticks of 10 ms). */
function cpuOf(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** Requests the server got so far from all connections (`cons`'s recved). */
async function received(port: number): Promise<number> {
  const cons = await fourLetterWord(port, 'cons', 2_000);
  return [...cons.matchAll(/recved=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0);
}

async function main(): Promise<void> {
  const rounds = Number(process.argv[2] ?? 7);
  const cycles = Number(process.argv[3] ?? 1_000);
  const zk = await startZooKeeper();
  const member = zk.members[0];
  const raw = await connectZooKeeper(zk.connectString);
  await call((done) => raw.mkdirp('/breakdown/key', (e) => done(e)));
  const backend = zookeeperBackend({ connectString: zk.connectString }).create({
    group: 'breakdown',
    keyPrefix: 'b:',
    driftFactor: 0.01,
    commandTimeout: 2_000,
    logger: new Logger('breakdown'),
  });
  await backend.start?.();
  @Module({
    imports: [
      RedlockModule.forRoot({
        backend: zookeeperBackend({ connectString: zk.connectString }),
        keyPrefix: 'n:',
      }),
    ],
    providers: [Calls],
  })
  class BreakdownModule {}
  const app = await NestFactory.createApplicationContext(BreakdownModule, { logger: ['error'] });
  const calls = app.get(Calls);

  const steps: Record<string, () => Promise<unknown>> = {
    floor: async () => {
      await call((done) => raw.create('/breakdown/node', CreateMode.EPHEMERAL, (e) => done(e)));
      await call((done) => raw.remove('/breakdown/node', -1, (e) => done(e)));
    },
    sequential: async () => {
      const path = await call<string>((done) =>
        raw.create('/breakdown/key/write-t-', EMPTY, CreateMode.EPHEMERAL_SEQUENTIAL, done),
      );
      await call((done) => raw.remove(path, -1, (e) => done(e)));
    },
    recipe: async () => {
      const results = await call<{ path?: string }[]>((done) =>
        raw
          .transaction()
          .create('/breakdown/key/write-t-', EMPTY, CreateMode.EPHEMERAL_SEQUENTIAL)
          .setData('/breakdown/key', EMPTY, -1)
          .commit((e, r) => done(e, r as { path?: string }[])),
      );
      await call((done) => raw.remove(results[0].path!, -1, (e) => done(e)));
    },
    backend: async () => {
      const lease = await backend.acquire(['u'], { ttl: 10_000, waitTimeout: 60_000 });
      await backend.release(lease);
    },
    locked: () => calls.cycle(),
  };
  const names = Object.keys(steps);
  const rates: Record<string, number[]> = {};
  const ratios: Record<string, number[]> = {};
  const clientCpu: Record<string, number[]> = {};
  const serverCpu: Record<string, number[]> = {};
  const requests: Record<string, number> = {};
  for (const name of names) {
    for (let i = 0; i < cycles; i++) await steps[name]();
    const before = await received(member.port);
    for (let i = 0; i < 100; i++) await steps[name]();
    // The connection of each `cons` shows in its own answer too, once before and once after.
    requests[name] = ((await received(member.port)) - before) / 100;
  }
  for (let round = 0; round < rounds; round++) {
    for (const name of names) {
      const cpu = process.cpuUsage();
      const jvm = cpuOf(member.pid!);
      const start = performance.now();
      for (let i = 0; i < cycles; i++) await steps[name]();
      const rate = (cycles * 1000) / (performance.now() - start);
      const used = process.cpuUsage(cpu);
      (rates[name] ??= []).push(rate);
      (ratios[name] ??= []).push(rate / rates.floor[round]);
      (clientCpu[name] ??= []).push((used.user + used.system) / cycles);
      (serverCpu[name] ??= []).push((cpuOf(member.pid!) - jvm) / cycles);
    }
  }
  console.log(
    '| step | cycles/s | x floor | requests / cycle | client CPU µs / cycle | ZooKeeper CPU µs / cycle |',
  );
  console.log('|---|---|---|---|---|---|');
  for (const name of names) {
    console.log(
      `| ${name} | ${median(rates[name]).toFixed(0)} | ${median(ratios[name]).toFixed(2)} | ${requests[
        name
      ].toFixed(
        2,
      )} | ${median(clientCpu[name]).toFixed(0)} | ${median(serverCpu[name]).toFixed(0)} |`,
    );
  }
  await app.close();
  await backend.close();
  raw.close();
  await zk.stop();
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
