import { performance } from 'node:perf_hooks';
import type { BackendNodeHealth } from '../../core/lock-backend';
import { HEALTH_PING_TIMED_OUT } from '../../redlock.messages';
import { nodeName, type RedisNode } from './redis-node';

/**
 * One node's PING within `timeout` ms: up with its latency, or down with why (the health
 * indicator and the lock board): the connection's last driver error when `connectionError`
 * knows one (a wrong password says WRONGPASS, not that the stream is not writeable).
 * @internal
 */
export async function pingNode(
  node: RedisNode,
  timeout: number,
  connectionError?: (node: RedisNode) => Error | undefined,
): Promise<BackendNodeHealth> {
  const name = nodeName(node);
  const start = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    // A connection with an offline queue would hold the PING until it reconnects: bounded here.
    await Promise.race([
      node.ping(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(HEALTH_PING_TIMED_OUT(timeout))), timeout);
      }),
    ]);
    const latencyMs = Math.round((performance.now() - start) * 100) / 100;
    return { node: name, status: 'up', latencyMs };
  } catch (err) {
    const cause = connectionError?.(node) ?? err;
    return {
      node: name,
      status: 'down',
      error: cause instanceof Error ? cause.message : String(cause),
    };
  } finally {
    clearTimeout(timer);
  }
}
