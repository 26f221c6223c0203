import { request } from './http';
import type { SampleCluster } from './sample-cluster';

/** The longest `--board` keeps the demo up, unless interrupted sooner. */
const MAX_MS = 30 * 60_000;
/** Buyers at once, spread over the instances; a few hot products, many cold ones. */
const BUYERS = 24;
const HOT_PRODUCTS = 3;
const STOCK = 1_000_000;

/**
 * `npm run demo -- --board`: after the demo's runs, keeps the instances up under a steady load
 * (purchases of a few hot products and many cold ones, a report build now and then) and prints
 * the lock board's URL, until Ctrl-C (or 30 minutes).
 */
export async function keepBoardUnderLoad(
  cluster: SampleCluster,
  say: (line?: string) => void,
): Promise<void> {
  const urls = cluster.urls;
  const created: number[] = [];
  for (let i = 0; i < HOT_PRODUCTS + 20; i++) {
    const res = await request<{ id: number }>({
      method: 'POST',
      url: `${urls[0]}/products`,
      body: { name: `board-${i}`, stock: STOCK },
    });
    created.push(res.body.id);
  }
  say();
  say(`lock board: ${urls[0]}/locks/  (user ops, password locks; every instance serves it)`);
  say('keeping the instances up under load; Ctrl-C stops everything.');
  let running = true;
  const stop = () => (running = false);
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const until = Date.now() + MAX_MS;
  const buyer = async (n: number) => {
    for (let i = 0; running && Date.now() < until; i++) {
      const hot = i % 4 !== 0;
      const id = hot ? created[n % HOT_PRODUCTS] : created[HOT_PRODUCTS + ((n + i) % 20)];
      const url = urls[(n + i) % urls.length];
      await request({
        method: 'POST',
        url: `${url}/products/${id}/purchase`,
        timeoutMs: 60_000,
      }).catch(() => undefined);
      if (n === 0 && i % 200 === 0) {
        void request({
          method: 'POST',
          url: `${url}/reports/daily`,
          body: { durationMs: 2_500 },
        }).catch(() => undefined);
      }
    }
  };
  await Promise.all(Array.from({ length: BUYERS }, (_, n) => buyer(n)));
  process.off('SIGINT', stop);
  process.off('SIGTERM', stop);
}
