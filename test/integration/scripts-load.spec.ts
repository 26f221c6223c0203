import type { Redis } from 'ioredis';
import * as scripts from '../../lib/redis/protocol/scripts';
import { redisForFile } from '../support/redis-for-file';

/**
 * Every script the engine sends by EVALSHA, loaded into a real redis-server: Redis compiles it
 * (a Lua syntax error fails here, not on a caller's first lock) and answers the SHA it files it
 * under, which must be the one the engine sends.
 */
let redis: Redis;
redisForFile((_server, r) => {
  redis = r;
});

// Every script the module defines: a new one is checked without being listed here.
const all = Object.values(scripts).filter(
  (s) => typeof s === 'object' && 'sha' in s,
) as scripts.Script<scripts.ScriptArgs, unknown>[];

it('finds the scripts by reading the module', () => {
  expect(all.map((s) => s.name)).toEqual(expect.arrayContaining(['TRY', 'RELEASE']));
});

it.each(all.map((s) => [s.name, s] as const))(
  '%s compiles in Redis, which files it under the SHA the engine sends',
  async (_name, script) => {
    expect(await redis.script('LOAD', script.lua)).toBe(script.sha);
  },
);
