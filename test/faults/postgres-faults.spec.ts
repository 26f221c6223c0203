import { describeSqlFaults } from '../support/sql-fault-suite';
import { postgresUnderTest } from '../support/sql-backends';

describe('postgresBackend faults (real PostgreSQL)', () => describeSqlFaults(postgresUnderTest));
