/**
 * `nest-locked/zookeeper`: locks on a ZooKeeper ensemble (optional peer: node-zookeeper-client).
 * @packageDocumentation
 */
export { zookeeperBackend, type ZooKeeperBackendOptions } from './zookeeper-backend';
