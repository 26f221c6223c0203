import { useRedis } from '../support/redis-server';
import { describeBackendScenarios } from '../support/backend-scenarios';

/** The scenarios every backend passes, on Redis: the reference the other backends are held to. */
describeBackendScenarios('redis', async () => {
  const server = await useRedis();
  return { spec: { kind: 'redis', clients: [server.url] }, stop: () => server.stop() };
});
