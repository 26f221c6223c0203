export { mysqlBackend, MYSQL_DEFAULT_POOL_SIZE, type MysqlBackendOptions } from './mysql-backend';
