import { performance } from 'node:perf_hooks';
import type { Etcd3 } from 'etcd3';
import type { BackendNodeHealth } from '../core/lock-backend';
import { HEALTH_PING_TIMED_OUT } from '../redlock.messages';

/**
 * Asks each endpoint for its status (Maintenance.Status, answered by that member alone) within
 * `timeout` ms: up with the round trip, and its role (leader or follower); or down with the error.
 * @internal
 */
export function checkEndpoints(
  endpoints: readonly (readonly [string, Etcd3])[],
  timeout: number,
): Promise<BackendNodeHealth[]> {
  return Promise.all(endpoints.map(([node, client]) => checkEndpoint(node, client, timeout)));
}

async function checkEndpoint(
  node: string,
  client: Etcd3,
  timeout: number,
): Promise<BackendNodeHealth> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    const status = await Promise.race([
      client.maintenance.status({ deadline: Date.now() + timeout }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(HEALTH_PING_TIMED_OUT(timeout))), timeout);
      }),
    ]);
    const latencyMs = Math.round((performance.now() - started) * 100) / 100;
    const leader = status.leader === status.header.member_id;
    return { node, status: 'up', latencyMs, role: leader ? 'leader' : 'follower' };
  } catch (error) {
    return { node, status: 'down', error: error instanceof Error ? error.message : String(error) };
  } finally {
    clearTimeout(timer);
  }
}
