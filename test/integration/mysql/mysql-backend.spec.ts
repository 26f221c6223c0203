import { describeSqlBackend } from '../../support/sql-backend-suite';
import { mysqlUnderTest } from '../../support/sql-backends';

describe('mysqlBackend (real MariaDB)', () => describeSqlBackend(mysqlUnderTest));
