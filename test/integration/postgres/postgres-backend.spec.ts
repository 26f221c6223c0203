import { describeSqlBackend } from '../../support/sql-backend-suite';
import { postgresUnderTest } from '../../support/sql-backends';

describe('postgresBackend (real PostgreSQL)', () => describeSqlBackend(postgresUnderTest));
