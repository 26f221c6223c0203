import { chaosSchedule, describeSchedule, FAULT_KINDS } from '../../scripts/chaos-schedule';

/** The chaos demo's seeded schedule (scripts/chaos-schedule.ts): repeatable, and always inside the sale. */
describe('chaosSchedule', () => {
  it('is the same for the same seed, and another seed picks another one', () => {
    const options = { stock: 100, ttlMs: 2_000 };
    expect(chaosSchedule(7, options)).toEqual(chaosSchedule(7, options));
    const schedules = [1, 2, 3, 4, 5].map((seed) => JSON.stringify(chaosSchedule(seed, options)));
    expect(new Set(schedules).size).toBeGreaterThan(1);
  });

  it.each([20, 40, 100, 1_000])(
    'stock %i: every fault once, in read order, inside the first 70% of the sale; a stall past the lease',
    (stock) => {
      for (let seed = 0; seed < 50; seed++) {
        const s = chaosSchedule(seed, { stock, ttlMs: 1_000 });
        expect(s.faults.map((f) => f.kind).sort()).toEqual([...FAULT_KINDS].sort());
        const reads = s.faults.map((f) => f.atRead);
        expect(reads).toEqual([...reads].sort((a, b) => a - b));
        expect(new Set(reads).size).toBe(reads.length);
        expect(reads[0]).toBeGreaterThanOrEqual(2);
        expect(reads[reads.length - 1]).toBeLessThanOrEqual(stock * 0.7);
        expect(s.stallMs).toBeGreaterThan(s.ttlMs);
        expect(s.newerSales).toBeGreaterThanOrEqual(1);
        expect(s.newerSales).toBeLessThanOrEqual(Math.ceil(stock * 0.15));
      }
    },
  );

  it('only the kinds asked for, and one printed line per fault', () => {
    const s = chaosSchedule(3, { stock: 60, ttlMs: 1_000, kinds: ['stall'] });
    expect(s.faults.map((f) => f.kind)).toEqual(['stall']);
    expect(describeSchedule(s)).toEqual([
      expect.stringMatching(/SIGSTOP .* SIGCONT after 1\.\d s \(lease 1\.0 s\)/),
    ]);
  });
});
