import * as path from 'node:path';
import { startPostgres } from '../test/support/postgres-server';
import { type SampleCluster, startSampleCluster } from './sample-cluster';

/**
 * `npm run demo -- --backend postgres`: the locked purchase modes once more, with the sample's
 * lock group on PostgreSQL (`nest-locked/postgres`) instead of Redis: a throwaway cluster on a
 * loopback port, the same number of instances on a SQLite file of their own, and their rows
 * (`backend: 'postgres'`) for the table beside the Redis ones. Everything it starts, it stops.
 */
export async function postgresRows<Row>(
  setup: { instances: number; latency: number; runDir: string; redisUrls: readonly string[] },
  modes: readonly string[],
  runMode: (mode: string, cluster: SampleCluster) => Promise<Row>,
  say: (line: string) => void,
): Promise<(Row & { backend: 'postgres' })[]> {
  const pg = await startPostgres();
  let cluster: SampleCluster | undefined;
  try {
    say(`postgres: started PostgreSQL on ${pg.port} (pid ${pg.pid}) for the (postgres) rows`);
    cluster = await startSampleCluster({
      instances: setup.instances,
      redisUrls: setup.redisUrls,
      dbPath: path.join(setup.runDir, 'shop-postgres.sqlite'),
      latencyMs: setup.latency,
      lockWaitMs: 60_000,
      namePrefix: 'pg',
      logDir: path.join(setup.runDir, 'logs'),
      env: { SAMPLE_LOCK_POSTGRES_URL: pg.url },
    });
    const rows: (Row & { backend: 'postgres' })[] = [];
    for (const mode of modes.filter((m) => m !== 'none')) {
      rows.push({ ...(await runMode(mode, cluster)), backend: 'postgres' });
    }
    return rows;
  } finally {
    await cluster?.stop();
    await pg.stop();
  }
}
