/**
 * Whether the replicas of one node acknowledge the writes of this process (`replicaAcks`). A
 * `WAIT` blocks its connection, so once the replicas stop answering, every later command on the
 * connection queues behind each further `WAIT` (`replicaAckTimeout` each): replies come seconds
 * late, and the scripts still run long after their callers were told they failed, taking keys
 * nobody holds. After a miss the gate lets one acknowledged write through at a time (a probe)
 * and refuses the others at once; the next acknowledged write opens it again.
 * @internal
 */
export class ReplicaAckGate {
  private missed = false;
  private probing = false;

  /** Whether a write may go now: 'open', 'probe' (the one allowed while closed) or false. */
  admit(): 'open' | 'probe' | false {
    if (!this.missed) return 'open';
    if (this.probing) return false;
    this.probing = true;
    return 'probe';
  }

  /** How an admitted write's acknowledgement went (any miss closes the gate, any success opens it). */
  settled(admitted: 'open' | 'probe', acknowledged: boolean): void {
    if (admitted === 'probe') this.probing = false;
    this.missed = !acknowledged;
  }
}
