import { ReplicaAckGate } from '../../lib/redis/protocol/replica-ack-gate';

describe('ReplicaAckGate', () => {
  it('lets every write go while acknowledgements come', () => {
    const gate = new ReplicaAckGate();
    expect([gate.admit(), gate.admit()]).toEqual(['open', 'open']);
    gate.settled('open', true);
    expect(gate.admit()).toBe('open');
  });

  it('after a miss, one probe at a time and the others refused; an acknowledged probe opens it', () => {
    const gate = new ReplicaAckGate();
    gate.settled(gate.admit() as 'open', false);
    expect(gate.admit()).toBe('probe');
    expect(gate.admit()).toBe(false);
    gate.settled('probe', false);
    expect(gate.admit()).toBe('probe');
    gate.settled('probe', true);
    expect([gate.admit(), gate.admit()]).toEqual(['open', 'open']);
  });

  it('a write admitted before the miss that is acknowledged later opens it again', () => {
    const gate = new ReplicaAckGate();
    const early = gate.admit() as 'open';
    gate.settled(gate.admit() as 'open', false);
    gate.settled(early, true);
    expect(gate.admit()).toBe('open');
  });
});
