import { runHistory } from '../support/history/history-run';
import { type HistoryTarget, startTarget } from '../support/history/history-targets';

/**
 * The negative control: the memory backend keeps each process's locks in that process, so
 * workers in separate processes hold the same key at once. The checker must say so; a checker
 * that passed this would pass anything.
 */
describe('history on the memory backend across processes (the checker can fail)', () => {
  let target: HistoryTarget;

  beforeAll(async () => {
    target = await startTarget('memory');
  });

  it('reports second holders within a valid lease and lost increments', async () => {
    const run = await runHistory(target, { seed: 1, durationMs: 2_000, kinds: [] });
    expect(run.report.holds).toBeGreaterThan(10);
    expect(run.report.unexplained.length).toBeGreaterThan(0);
    expect(run.report.lostIncrements).toBeGreaterThan(0);
  }, 60_000);
});
