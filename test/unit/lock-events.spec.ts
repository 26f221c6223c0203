import {
  LockBackendError,
  LockConfigError,
  LockLostError,
  LockNotAcquiredError,
  type LockServiceEvents,
} from 'nest-locked';
import { LockEvents, type NestEventBus } from '../../lib/api/lock-events';

/** A stand-in for EventEmitter2: its listeners by name, and what was emitted. */
class FakeBus implements NestEventBus {
  readonly emitted: [string, unknown][] = [];
  readonly listening = new Set<string>();
  emit(event: string, value: unknown): boolean {
    this.emitted.push([event, value]);
    return true;
  }
  hasListeners(event: string): boolean {
    return this.listening.has(event);
  }
}

const acquired = { keys: ['k'], client: 'default', fence: 7, waitedMs: 3 };

describe('LockEvents', () => {
  let failures: [string, unknown][];
  let events: LockEvents;
  beforeEach(() => {
    failures = [];
    events = new LockEvents((event, err) => failures.push([event, err]));
  });

  it('keeps every flag down while nobody observes, so emission points build nothing', () => {
    expect([events.acquired, events.released, events.busy, events.lost, events.error]).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
    events.connect(undefined, undefined);
    expect(events.acquired || events.released || events.busy || events.lost || events.error).toBe(
      false,
    );
  });

  it('raises only the flag of the event listened to, and lowers it with the last off()', () => {
    const one: LockServiceEvents['acquired'] = () => undefined;
    const two: LockServiceEvents['acquired'] = () => undefined;
    events.on('acquired', one);
    events.on('acquired', two);
    expect(events.acquired).toBe(true);
    expect(events.released || events.busy || events.lost || events.error).toBe(false);
    events.off('acquired', one);
    expect(events.acquired).toBe(true);
    events.off('acquired', two);
    expect(events.acquired).toBe(false);
  });

  it('hands the payload to local listeners', () => {
    const seen: unknown[] = [];
    events.on('acquired', (e) => seen.push(e));
    expect(events.wants('acquired')).toBe(true);
    events.emit('acquired', acquired);
    expect(seen).toEqual([acquired]);
  });

  it('logs a listener that throws instead of throwing into the lock call', () => {
    const boom = new Error('listener bug');
    events.on('released', () => {
      throw boom;
    });
    expect(() =>
      events.emit('released', { keys: ['k'], client: 'default', fence: 1, heldMs: 2 }),
    ).not.toThrow();
    expect(failures).toEqual([['released', boom]]);
  });

  it.each([
    ['telemetry', () => events.connect(undefined, { record: () => undefined })],
    [
      '@OnEvent(nest-locked.error)',
      () => {
        const bus = new FakeBus();
        bus.listening.add('nest-locked.error');
        events.connect(bus, undefined);
      },
    ],
  ])(
    "emits 'error' with no local listener of its own and logs nothing (%s)",
    (_, observe: () => void) => {
      observe();
      const error = new LockBackendError(['k'], [new Error('ECONNREFUSED')], 'acquire');
      expect(events.error && events.wants('error')).toBe(true);
      events.emit('error', { keys: ['k'], client: 'default', operation: 'acquire', error });
      // An EventEmitter with no 'error' listener throws "Unhandled error": an outage would be
      // logged once per failed call.
      expect(failures).toEqual([]);
    },
  );

  it('refuses names that are not lock events (plain JavaScript callers)', () => {
    const on = events.on.bind(events) as (event: string, listener: () => void) => void;
    expect(() => on('acquire', () => undefined)).toThrow(LockConfigError);
    expect(() => on('acquire', () => undefined)).toThrow(/"acquired", "released"/);
  });

  describe('with the Nest event bus', () => {
    let bus: FakeBus;
    beforeEach(() => {
      bus = new FakeBus();
      events.connect(bus, undefined);
    });

    it('raises every flag but asks the bus per event whether anyone listens', () => {
      expect(events.acquired && events.lost).toBe(true);
      expect(events.wants('acquired')).toBe(false);
      bus.listening.add('nest-locked.acquired');
      expect(events.wants('acquired')).toBe(true);
      expect(events.wants('lost')).toBe(false);
    });

    it('emits as nest-locked.<event> only where the bus has listeners', () => {
      bus.listening.add('nest-locked.acquired');
      events.emit('acquired', acquired);
      events.emit('released', { keys: ['k'], client: 'default', fence: 7, heldMs: 1 });
      expect(bus.emitted).toEqual([['nest-locked.acquired', acquired]]);
    });
  });

  describe('refused()', () => {
    it('reports contention as busy and a Redis failure as error, each error object once', () => {
      const seen: [string, unknown][] = [];
      events.on('busy', (e) => seen.push(['busy', e]));
      events.on('error', (e) => seen.push(['error', e]));
      const busy = new LockNotAcquiredError(['a'], 120, 50);
      const down = new LockBackendError(['b'], [new Error('ECONNREFUSED')]);
      events.refused(busy, 'orders');
      events.refused(busy, 'orders'); // rethrown by an outer call: the same object
      events.refused(down, 'default');
      events.refused(new LockLostError(['c'], 'lost'), 'default');
      events.refused(new TypeError('not a lock error'), 'default');
      expect(seen).toEqual([
        ['busy', { keys: ['a'], client: 'orders', waitedMs: 120 }],
        ['error', { keys: ['b'], client: 'default', operation: 'acquire', error: down }],
      ]);
    });

    it('builds nothing when nobody listens to that outcome', () => {
      const emit = jest.spyOn(events, 'emit');
      events.on('error', () => undefined);
      events.refused(new LockNotAcquiredError(['a'], 1, 1), 'default');
      expect(emit).not.toHaveBeenCalled();
    });
  });
});
