import * as path from 'node:path';
import { freshRunDir } from './demo-args';
import { say } from './demo-progress';
import { stopOnSignals } from './demo-stop';
import { post } from './http';
import { ensureRedisServer, type RedisProcess, startRedis } from './redis';
import { type SampleCluster, startSampleCluster } from './sample-cluster';

/** How long the demo waits for the warning (the instances share edges every 5 s). */
const WARNING_WITHIN_MS = 20_000;

/**
 * `npm run demo -- --inversion`: the sample's real lock-order inversion, seen by lock-order
 * checking. Two instances with `SAMPLE_LOCK_INVERSION=on` on one Redis: app-1 transfers a -> b
 * (holds `account:{}`, posts to `ledger:{}`), then app-2 closes the day's ledger (holds
 * `ledger:{}`, audits each account). One after the other, so nothing deadlocks; the instances
 * share the order edges through Redis, and the first to see both orders logs the cycle, which
 * the demo prints with the instance that logged it.
 */
export async function runInversionDemo(): Promise<number> {
  const runDir = freshRunDir('inversion');
  let redis: RedisProcess | undefined;
  let cluster: SampleCluster | undefined;
  const stopAll = async () => {
    await cluster?.stop();
    await redis?.stop();
  };
  const removeSignals = stopOnSignals(stopAll);
  try {
    redis = await startRedis(ensureRedisServer(say));
    cluster = await startSampleCluster({
      instances: 2,
      redisUrls: [redis.url],
      dbPath: path.join(runDir, 'shop.sqlite'),
      logLevels: 'warn,error',
      logDir: path.join(runDir, 'logs'),
      env: { SAMPLE_LOCK_INVERSION: 'on' },
    });
    const [one, two] = cluster.instances;
    say(
      `redis :${redis.port}; ${one.name} :${one.port}, ${two.name} :${two.port} (SAMPLE_LOCK_INVERSION=on)`,
    );
    await post(`${one.url}/accounts`, { id: 'a', balance: 100 });
    await post(`${one.url}/accounts`, { id: 'b', balance: 100 });
    say(`${one.name}: POST /accounts/transfer a -> b (holds account:{}, then posts to ledger:{})`);
    await post(`${one.url}/accounts/transfer`, { from: 'a', to: 'b', amount: 10 });
    const day = new Date().toISOString().slice(0, 10);
    say(
      `${two.name}: POST /accounts/ledger/close ${day} (holds ledger:{}, then audits account:{})`,
    );
    await post(`${two.url}/accounts/ledger/close`, { day, accounts: ['a', 'b'] });
    const deadline = Date.now() + WARNING_WITHIN_MS;
    for (;;) {
      const warned = cluster.instances.find((i) => i.output().includes('possible deadlock'));
      if (warned) {
        const text = warned.output();
        const start = text.lastIndexOf('\n', text.indexOf('possible deadlock')) + 1;
        const end = text.indexOf('sorted order.', start);
        say();
        say(`${warned.name} logged:`);
        say(text.slice(start, end < 0 ? undefined : end + 'sorted order.'.length));
        return 0;
      }
      if (Date.now() > deadline) {
        say(`no lock-order warning within ${WARNING_WITHIN_MS} ms; logs in ${runDir}/logs`);
        return 1;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    removeSignals();
    await stopAll();
  }
}
