export {
  postgresBackend,
  POSTGRES_DEFAULT_POOL_SIZE,
  type PostgresBackendOptions,
} from './postgres-backend';
