import { spawn } from 'node:child_process';
import { once } from 'node:events';

/**
 * Stalls of this test process, and a separate client that acts on Redis while this process
 * cannot: the set-up of tests where a reply or grant is read only after its time ran out.
 */

/** Blocks the event loop for `ms` (a long synchronous computation, a GC pause, a starved CPU). */
export function blockEventLoop(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // spin
  }
}

/**
 * After `delayMs`, another OS process (redis-cli on 127.0.0.1:`port`) runs
 * `SET <key> <value> NX PX <pxMs>`, so it acts even while this process's event loop is blocked.
 * Resolves, once that process exited, to what redis-cli printed (`OK` if it took the key).
 */
export async function setNxFromAnotherProcess(
  port: number,
  key: string,
  value: string,
  { delayMs, pxMs }: { delayMs: number; pxMs: number },
): Promise<string> {
  const command = `sleep ${delayMs / 1000}; redis-cli -h 127.0.0.1 -p ${port} SET '${key}' ${value} NX PX ${pxMs}`;
  const child = spawn('sh', ['-c', command], { stdio: ['ignore', 'pipe', 'ignore'] });
  let said = '';
  child.stdout.on('data', (d: Buffer) => (said += d.toString()));
  await once(child, 'exit');
  return said;
}
