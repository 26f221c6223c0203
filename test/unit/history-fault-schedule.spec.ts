import { faultSchedule, PLANNED_FAULT_KINDS } from '../support/history/fault-schedule';

describe('faultSchedule', () => {
  const options = { durationMs: 60_000, lease: 1_000, kinds: PLANNED_FAULT_KINDS };

  it('gives the same schedule for the same seed, another for another seed', () => {
    expect(faultSchedule(7, options)).toEqual(faultSchedule(7, options));
    expect(faultSchedule(8, options)).not.toEqual(faultSchedule(7, options));
  });

  it('has every kind once first, then draws, all inside the run and one after the other', () => {
    const faults = faultSchedule(7, options);
    const first = faults.slice(0, PLANNED_FAULT_KINDS.length).map((f) => f.kind);
    expect([...first].sort()).toEqual([...PLANNED_FAULT_KINDS].sort());
    expect(faults.length).toBeGreaterThan(PLANNED_FAULT_KINDS.length);
    for (const [i, f] of faults.entries()) {
      expect(f.at + f.ms).toBeLessThanOrEqual(options.durationMs);
      if (i > 0) expect(f.at).toBeGreaterThanOrEqual(faults[i - 1].at + faults[i - 1].ms);
    }
  });

  it('freezes a holder past its lease for a long freeze, and well inside it for a brief one', () => {
    const faults = faultSchedule(3, options);
    for (const f of faults.filter((x) => x.kind === 'holder-frozen-long'))
      expect(f.ms).toBeGreaterThan(options.lease);
    // Under two thirds of a lease: what a holder that renews every third always has left.
    for (const f of faults.filter((x) => x.kind === 'holder-frozen-brief'))
      expect(f.ms).toBeLessThan((options.lease * 2) / 3);
  });
});
