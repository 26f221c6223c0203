import {
  isRecordedRedisServer,
  type PidRecord,
  processExists,
  readPidRecords,
  removePidRecord,
  removeServerDir,
} from './pid-registry';

/**
 * Jest global teardown: SIGKILLs the redis-server processes that tests of this run started and
 * never stopped (a forgotten `stop()`, a crashed worker). Servers of another jest run that is
 * still going on this machine are left alone; those of a run that died are reaped too.
 */
export default async function globalTeardown(): Promise<void> {
  const killed: number[] = [];
  for (const record of readPidRecords()) {
    if (!processExists(record.pid) || !isRecordedRedisServer(record)) {
      // Gone, or the PID now belongs to something else: only the record is stale.
      removePidRecord(record.pid);
      continue;
    }
    if (!isOurs(record)) continue;
    try {
      process.kill(record.pid, 'SIGKILL');
      killed.push(record.pid);
    } catch {
      // It exited between the check and the kill.
    }
    removePidRecord(record.pid);
    removeServerDir(record.dir);
  }
  if (killed.length > 0) {
    process.stderr.write(
      `[redis harness] killed ${killed.length} redis-server process(es) the tests left running ` +
        `(PIDs ${killed.join(', ')}); stop every server in afterAll.\n`,
    );
  }
}

/** Jest runs tests in its own process (--runInBand) or in worker processes it forked. */
function isOurs(record: PidRecord): boolean {
  if (record.owner === process.pid || record.ownerParent === process.pid) return true;
  return !processExists(record.owner) && !processExists(record.ownerParent);
}
