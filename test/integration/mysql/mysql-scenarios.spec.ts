import { describeBackendScenarios } from '../../support/backend-scenarios';
import { startMariadb } from '../../support/mariadb-server';

/** The scenarios every backend passes, across 4 OS processes, on MariaDB (for MySQL). */
describeBackendScenarios(
  'mysql',
  async () => {
    const db = await startMariadb();
    return { spec: { kind: 'mysql', options: { ...db.config } }, stop: () => db.stop() };
  },
  // No permits on MySQL (refused at startup, see docs/backends/mysql.md).
  { permits: false },
);
