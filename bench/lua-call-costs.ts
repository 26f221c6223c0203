/**
 * What each command inside a lock script costs Redis: `node dist-apps/bench/lua-call-costs.js`
 * (after `npm run build:apps`). One fresh redis-server, one connection, sequential cycles of an
 * acquire script and a release script per variant, the variants interleaved round by round so
 * they all see the same machine; `INFO commandstats` usec per cycle, EVALSHA (a script with what
 * it ran) first. A command's own usec are small: what a call costs is mostly the Lua bridge around
 * it, which only the EVALSHA line shows. docs/performance.md quotes its figures.
 *   ROUNDS (default 20) x CYCLES (default 1,000) per variant.
 */
import * as path from 'node:path';
import { Redis } from 'ioredis';
import { PROTOCOL_WORDS } from '../lib/redis/protocol/key-space';
import * as scriptConstants from '../lib/redis/protocol/script-constants';
import { loadScript } from '../lib/redis/protocol/script-loader';
import { ensureRedisServer, killAllStartedSync, startRedis } from '../scripts/redis';

const ROUNDS = Number(process.env.ROUNDS ?? 20);
const CYCLES = Number(process.env.CYCLES ?? 1_000);
const LUA = path.resolve(__dirname, '..', '..', 'lib', 'redis', 'lua');
const CONSTANTS = { ...scriptConstants, ...PROTOCOL_WORDS };

/** A script and how it is called: its keys for variant key `k`, its arguments for token `t`. */
interface Call {
  lua: string;
  keys: (k: string) => string[];
  args: (t: string) => (string | number)[];
}

const SET_NX =
  "if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end\n";
const acquirePlus = (extra: string): Call => ({
  lua: `${SET_NX}${extra}\nreturn 1`,
  keys: (k) => [k, `${k}:fence`],
  args: (t) => [t, 30_000],
});
const compareAndDelete: Call = {
  lua: "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
  keys: (k) => [k],
  args: (t) => [t],
};
const sixKeys = (k: string) => [k, `${k}:fence`, `${k}:wait`, `${k}:q`, `${k}:qm`, `${k}:h`];
// The engine's own scripts, read once: `fence` is how their fences are drawn (clock or count).
const TRY = loadScript('try', CONSTANTS, LUA);
const RELEASE = loadScript('release', CONSTANTS, LUA);
const tryCall = (fence: 'clock' | 'count'): Call => ({
  lua: TRY,
  keys: (k) => [k, `${k}:fence`],
  args: (t) => [t, 30_000, 5, fence],
});
const releaseCall = (fence: 'clock' | 'count'): Call => ({
  lua: RELEASE,
  keys: sixKeys,
  args: (t) => [t, '0', 5, fence],
});

/** [acquire, release] per variant: one more call each, then the real cycles. */
const VARIANTS: Record<string, [Call, Call]> = {
  'SET NX PX': [acquirePlus(''), compareAndDelete],
  '+ GET': [acquirePlus("redis.call('GET', KEYS[2])"), compareAndDelete],
  '+ INCRBY': [acquirePlus("redis.call('INCRBY', KEYS[2], 5)"), compareAndDelete],
  '+ TIME': [acquirePlus("redis.call('TIME')"), compareAndDelete],
  'TRY (clock) + RELEASE': [tryCall('clock'), releaseCall('clock')],
  'TRY (count) + RELEASE': [tryCall('count'), releaseCall('count')],
  // The same release code with the two keys it reads on this path, not six: what keys cost.
  'TRY (count) + RELEASE, 2 keys': [
    tryCall('count'),
    {
      lua: "local owner = redis.call('GET', KEYS[1])\nif owner == ARGV[1] then return redis.call('DEL', KEYS[1], KEYS[2]) end\nreturn 0",
      keys: (k) => [k, `${k}:wait`],
      args: (t) => [t],
    },
  ],
};

async function usecByCommand(conn: Redis): Promise<Record<string, [number, number]>> {
  const out: Record<string, [number, number]> = {};
  for (const m of (await conn.info('commandstats')).matchAll(
    /cmdstat_(\w+):calls=(\d+),usec=(\d+)/g,
  )) {
    if (m[1] !== 'info' && m[1] !== 'config') out[m[1]] = [Number(m[2]), Number(m[3])];
  }
  return out;
}

async function main(): Promise<void> {
  const server = await startRedis(ensureRedisServer((line) => console.log(line)));
  const conn = new Redis({ host: '127.0.0.1', port: server.port, maxRetriesPerRequest: 1 });
  try {
    const names = Object.keys(VARIANTS);
    const shas = new Map<Call, string>();
    for (const call of names.flatMap((n) => VARIANTS[n])) {
      shas.set(call, (await conn.script('LOAD', call.lua)) as string);
    }
    const total: Record<string, Record<string, [number, number]>> = {};
    for (let round = 0; round < ROUNDS; round++) {
      for (const [i, name] of names.entries()) {
        const key = `costs:{${i}}`;
        await conn.config('RESETSTAT');
        for (let c = 0; c < CYCLES; c++) {
          const token = `t${round}:${c}`;
          for (const call of VARIANTS[name]) {
            const keys = call.keys(key);
            await conn.evalsha(shas.get(call)!, keys.length, ...keys, ...call.args(token));
          }
        }
        const t = (total[name] ??= {});
        for (const [cmd, [calls, us]] of Object.entries(await usecByCommand(conn))) {
          const e = (t[cmd] ??= [0, 0]);
          e[0] += calls;
          e[1] += us;
        }
      }
    }
    const cycles = ROUNDS * CYCLES;
    console.log(`Redis server µs per cycle (${ROUNDS} rounds x ${CYCLES} cycles per variant):`);
    for (const name of names) {
      const by = Object.entries(total[name]).sort((a, b) => b[1][1] - a[1][1]);
      const cells = by.map(
        ([cmd, [calls, us]]) =>
          `${cmd} ${(calls / cycles).toFixed(2)} x ${(us / cycles).toFixed(2)}`,
      );
      console.log(`${name.padEnd(32)} ${cells.join(', ')}`);
    }
  } finally {
    conn.disconnect();
    await server.stop();
  }
}

main().catch((e: unknown) => {
  killAllStartedSync();
  console.error(e);
  process.exitCode = 1;
});
