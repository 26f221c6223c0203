import type { BoardKeyLine } from '../../lib/core/board-source';
import {
  heldFromServer,
  heldFromViews,
  Holders,
  lineFromServer,
  linesFromViews,
  seriesOf,
  tokenHint,
} from '../../lib/board/board-data';
import type { InstanceView } from '../../lib/board/instance-view';
import { STEP_MS, STEPS } from '../../lib/board/key-rates';

const view = (over: Partial<InstanceView>): InstanceView => ({
  id: 'id',
  name: 'a',
  host: 'h',
  pid: 1,
  at: 0,
  group: 'g',
  backend: 'redis',
  holds: [],
  holdsCut: false,
  waiting: [],
  rates: { total: [], keys: {} },
  ...over,
});

describe('board data', () => {
  const a = view({
    id: 'A',
    name: 'app-1',
    owner: 'AAAAAAAAAAAA',
    holds: [
      {
        key: 'product:1',
        token: 'AAAAAAAAAAAA.7',
        fence: 42,
        mode: 'exclusive',
        since: 1_000,
        ttl: 30_000,
        validUntil: 31_000,
        renewals: 0,
      },
    ],
  });
  const b = view({ id: 'B', name: 'app-2', owner: 'BBBBBBBBBBBB' });

  it('never shows a whole token', () => {
    expect(tokenHint('AAAAAAAAAAAA.7')).toBe('AAAA….7');
    expect(tokenHint('AAAAAAAAAAAA.7')).not.toContain('AAAAAAAAAAAA');
  });

  const holder = (token: string) => ({ owner: token.split('.')[0], token });

  it("names the holder of a server's lock and takes fence and age from its view", () => {
    const holders = new Holders([a, b]);
    const row = heldFromServer(
      'g',
      {
        key: 'product:1',
        mode: 'exclusive',
        leaseLeftMs: 20_000,
        holders: [holder('AAAAAAAAAAAA.7')],
      },
      holders,
      0,
      4_000,
    );
    expect(row).toMatchObject({ instance: 'app-1', fence: 42, heldMs: 3_000, leaseLeftMs: 20_000 });
    const shared = heldFromServer(
      'g',
      {
        key: 'k',
        mode: 'permits 3',
        leaseLeftMs: 5_000,
        holders: [holder('AAAAAAAAAAAA.1'), holder('BBBBBBBBBBBB.2')],
      },
      holders,
      100,
      100,
    );
    expect(shared).toMatchObject({ mode: 'permits 3', instance: 'app-1, app-2', holders: 2 });
    // A server that keeps no lease and no fence (a session lock): both from the holder's view.
    const session = heldFromServer(
      'g',
      {
        key: 'product:1',
        mode: 'exclusive',
        leaseLeftMs: null,
        holders: [{ owner: 'AAAAAAAAAAAA' }],
      },
      holders,
      0,
      4_000,
    );
    expect(session).toMatchObject({ instance: 'app-1', fence: 42, leaseLeftMs: 27_000 });
    // A holder no instance publishes: no name.
    const unknown = heldFromServer(
      'g',
      { key: 'x', mode: 'exclusive', leaseLeftMs: 1_000, holders: [{ owner: 'C', since: 500 }] },
      holders,
      1_000,
      4_000,
    );
    expect(unknown).toMatchObject({ instance: null, fence: null, heldMs: 500 });
  });

  it("reads a server's line in order with instance, wait and deadline", () => {
    const line = lineFromServer(
      'g',
      {
        key: 'product:1',
        length: 2,
        waiters: [
          { ...holder('BBBBBBBBBBBB.1'), mode: 'exclusive', since: 1_000, deadline: 9_000 },
          { ...holder('AAAAAAAAAAAA.9'), mode: 'read', since: 2_000, deadline: 12_000 },
        ],
      },
      new Holders([a, b]),
      [a, b],
      { serverNow: 5_000, now: 5_000 },
      false,
    );
    expect(line.waiters).toEqual([
      {
        instance: 'app-2',
        token: 'BBBB….1',
        mode: 'exclusive',
        waitedMs: 4_000,
        deadlineInMs: 4_000,
        inProcess: false,
      },
      {
        instance: 'app-1',
        token: 'AAAA….9',
        mode: 'read',
        waitedMs: 3_000,
        deadlineInMs: 7_000,
        inProcess: false,
      },
    ]);
    expect(line).toMatchObject({ length: 2, complete: true });
  });

  it('counts the callers waiting inside their process, and says "at least" past what it sees', () => {
    // app-2's first caller is queued on the server; two more wait behind it in app-2.
    const b2 = view({
      ...b,
      waiting: [
        { key: 'product:1', since: 1_000, mode: 'exclusive', queued: true },
        { key: 'product:1', since: 2_000, mode: 'exclusive' },
        { key: 'product:1', since: 3_000, deadline: 9_000, mode: 'exclusive' },
        { key: 'other', since: 3_000, mode: 'exclusive' },
      ],
    });
    const stored = (tokens: string[], length = tokens.length): BoardKeyLine => ({
      key: 'product:1',
      length,
      waiters: tokens.map((token) => ({ ...holder(token), mode: 'exclusive', since: 1_000 })),
    });
    const times = { serverNow: 5_000, now: 5_000 };
    const line = lineFromServer(
      'g',
      stored(['BBBBBBBBBBBB.1']),
      new Holders([a, b2]),
      [a, b2],
      times,
      false,
    );
    expect(line).toMatchObject({ length: 3, complete: true });
    expect(line.waiters.map((w) => [w.instance, w.inProcess, w.waitedMs])).toEqual([
      ['app-2', false, 4_000],
      ['app-2', true, 3_000],
      ['app-2', true, 2_000],
    ]);
    // A server whose line holds every caller: the views add none.
    const every = lineFromServer(
      'g',
      stored(['BBBBBBBBBBBB.1']),
      new Holders([a, b2]),
      [a, b2],
      times,
      true,
    );
    expect(every).toMatchObject({ length: 1, complete: true });
    // A process that publishes nothing may have more callers behind its one on the server.
    const unknown = lineFromServer(
      'g',
      stored(['CCCCCCCCCCCC.1']),
      new Holders([a, b]),
      [a, b],
      times,
      false,
    );
    expect(unknown).toMatchObject({ length: 1, complete: false });
    // A line longer than what was read: its unread waiters are not attributed.
    const long = lineFromServer(
      'g',
      stored(['BBBBBBBBBBBB.1'], 80),
      new Holders([a, b]),
      [a, b],
      times,
      false,
    );
    expect(long).toMatchObject({ length: 80, complete: false });
    // Only in-process waiters (their process holds the key): a line with none on the server.
    const a2 = view({ ...a, waiting: b2.waiting.slice(1) });
    const only = lineFromServer(
      'g',
      stored([]),
      new Holders([a2]),
      [a2],
      { serverNow: 0, now: 5_000 },
      false,
    );
    expect(only).toMatchObject({ length: 2, complete: true });
  });

  it('builds rows and lines of a backend from what its instances publish', () => {
    const m = view({
      name: 'm1',
      backend: 'memory',
      holds: a.holds,
      waiting: [
        { key: 'product:1', since: 2_000, deadline: 9_000, mode: 'exclusive' },
        { key: 'product:1', since: 1_500, mode: 'read' },
      ],
    });
    expect(heldFromViews('g', [m], 2_000)).toMatchObject([
      { key: 'product:1', instance: 'm1', fence: 42, heldMs: 1_000, leaseLeftMs: 29_000 },
    ]);
    const [line] = linesFromViews('g', [m], 3_000, false);
    expect(line).toMatchObject({ length: 2, complete: false });
    expect(line.waiters.map((w) => [w.mode, w.waitedMs, w.deadlineInMs])).toEqual([
      ['read', 1_500, null],
      ['exclusive', 1_000, 6_000],
    ]);
  });

  it('adds the instances’ steps and reads rates and percentiles from them', () => {
    const t = 100 * STEP_MS;
    const s = seriesOf(
      [
        [{ t, acquires: 40, busy: 0, waits: [[0, 40]] }],
        [{ t, acquires: 10, busy: 10, waits: [[12, 20]] }],
      ],
      t + 2 * STEP_MS,
    );
    const i = s.t.indexOf(t / 1000);
    expect(s.acquiresPerSec[i]).toBe(50 / (STEP_MS / 1000));
    expect(s.busyRate[i]).toBe(10 / 60);
    expect(s.p50[i]).toBe(1);
    expect(s.p99[i]).toBe(16);
  });

  it('an idle step is a zero of acquires and a gap of rates and waits, never left out', () => {
    const t = 100 * STEP_MS;
    const step = (at: number) => ({
      t: at,
      acquires: 5,
      busy: 0,
      waits: [[3, 5]] as [number, number][],
    });
    // Activity, three idle steps, activity again; read in the middle of the step after.
    const now = t + 5 * STEP_MS + 1_000;
    const s = seriesOf([[step(t), step(t + 4 * STEP_MS)]], now);
    // Every step of the window is there, one STEP_MS apart, up to the step in progress.
    expect(s.t).toHaveLength(STEPS);
    expect(s.t[s.t.length - 1]).toBe((t + 5 * STEP_MS) / 1000);
    s.t.slice(1).forEach((v, k) => expect(v - s.t[k]).toBe(STEP_MS / 1000));
    const at = (ms: number) => s.t.indexOf(ms / 1000);
    for (const idle of [1, 2, 3, 5].map((n) => at(t + n * STEP_MS))) {
      expect(s.acquiresPerSec[idle]).toBe(0);
      expect(s.busyRate[idle]).toBeNull();
      expect(s.p50[idle]).toBeNull();
      expect(s.p99[idle]).toBeNull();
    }
    expect(s.acquiresPerSec[at(t)]).toBe(1);
    expect(s.acquiresPerSec[at(t + 4 * STEP_MS)]).toBe(1);
    // Nothing at all in the window: no series (the page says there was no activity).
    expect(seriesOf([[step(t)]], t + STEPS * STEP_MS + 1).t).toEqual([]);
  });
});
