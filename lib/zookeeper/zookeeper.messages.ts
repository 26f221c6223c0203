/** The messages of `nest-locked/zookeeper` (`zookeeper/`). */

export const ZK_NOT_CONNECTED = (connectString: string, ms: number) =>
  `not connected to ${connectString} after ${Math.round(ms)} ms: no member reachable, ` +
  'or none serving (quorum lost)';
export const ZK_NO_ANSWER = (connectString: string, ms: number) =>
  `no answer from ${connectString} within ${ms} ms (a member frozen or cut off, or ` +
  'quorum lost); the client moves to another member';
export const ZK_DRIVER_FAULT = (connectString: string, fault: string) =>
  `node-zookeeper-client could not read a reply from ${connectString} (${fault}); the ` +
  'connection was dropped and is made again, with the same session';
export const ZK_SESSION_EXPIRED = (connectString: string) =>
  `the session expired (${connectString}): every lock it held is free for others`;
export const ZK_NODE_GONE = (key: string) =>
  `the lock node of ${JSON.stringify(key)} is gone (its session ended, or it was deleted)`;
export const ZK_SESSION_UNCONFIRMED = (timeout: number) =>
  `the session could not be confirmed within its ${timeout} ms timeout after a pause of this ` +
  'process (frozen or starved of CPU): the lock was not taken';
export const ZK_NOT_INSTALLED =
  'nest-locked/zookeeper needs the node-zookeeper-client package: npm install node-zookeeper-client';
export const ZK_BAD_OPTION = (field: string, value: unknown, expected: string) =>
  `zookeeperBackend: ${field} must be ${expected}; got ${typeof value === 'string' ? JSON.stringify(value) : String(value)}.`;
export const ZK_MEMBER_NOT_SERVING = 'the member is up but not serving requests (it has no quorum)';
export const ZK_NO_HEALTH_ANSWER = (ms: number) => `no answer within ${ms} ms`;
