import { describeBackendScenarios } from '../../support/backend-scenarios';
import { startPostgres } from '../../support/postgres-server';

/** The scenarios every backend passes, across 4 OS processes, on PostgreSQL. */
describeBackendScenarios('postgres', async () => {
  const pg = await startPostgres();
  return { spec: { kind: 'postgres', options: { ...pg.config } }, stop: () => pg.stop() };
});
