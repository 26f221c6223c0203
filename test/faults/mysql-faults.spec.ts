import { describeSqlFaults } from '../support/sql-fault-suite';
import { mysqlUnderTest } from '../support/sql-backends';

describe('mysqlBackend faults (real MariaDB)', () => describeSqlFaults(mysqlUnderTest));
