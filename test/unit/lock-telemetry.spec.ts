import * as api from '@opentelemetry/api';
import { context, metrics, type Span, SpanStatusCode, trace } from '@opentelemetry/api';
import { LOCK_METRICS, LockBackendError, LockConfigError, LockLostError } from 'nest-locked';
import { LockTelemetry } from '../../lib/api/lock-telemetry';
import { resolveRedlockOptions } from '../../lib/options/redlock-options';
import {
  AlsContextManager,
  type FakeSpan,
  fakeMeterProvider,
  fakeTracerProvider,
  type Measurement,
} from '../support/fake-otel';

const client = 'orders';
const acquired = { keys: ['k'], client, fence: 41, waitedMs: 12 };

describe('LockTelemetry', () => {
  afterEach(() => {
    metrics.disable();
    trace.disable();
    context.disable();
  });

  describe('start()', () => {
    it('is off when no MeterProvider or TracerProvider is registered (auto)', () => {
      expect(LockTelemetry.start('auto')).toBeUndefined();
    });

    it('is off with telemetry: false even when providers are registered', () => {
      metrics.setGlobalMeterProvider(fakeMeterProvider([]));
      trace.setGlobalTracerProvider(fakeTracerProvider([]));
      const load = jest.fn(() => api);
      expect(LockTelemetry.start(false, load)).toBeUndefined();
      expect(load).not.toHaveBeenCalled();
    });

    it('is off without @opentelemetry/api (auto), and fails startup with telemetry: true', () => {
      expect(LockTelemetry.start('auto', () => undefined)).toBeUndefined();
      expect(() => LockTelemetry.start(true, () => undefined)).toThrow(LockConfigError);
      expect(() => LockTelemetry.start(true, () => undefined)).toThrow(/@opentelemetry\/api/);
    });

    it('meters without tracing when only a MeterProvider is registered', () => {
      metrics.setGlobalMeterProvider(fakeMeterProvider([]));
      const telemetry = LockTelemetry.start('auto');
      expect(telemetry).toBeDefined();
      expect(telemetry!.tracing).toBe(false);
    });

    it('traces when only a TracerProvider is registered', () => {
      trace.setGlobalTracerProvider(fakeTracerProvider([]));
      expect(LockTelemetry.start('auto')?.tracing).toBe(true);
    });
  });

  describe('the telemetry option', () => {
    it("defaults to 'auto' and takes true, false or 'auto' only", () => {
      expect(resolveRedlockOptions({}).telemetry).toBe('auto');
      expect(resolveRedlockOptions({ telemetry: false }).telemetry).toBe(false);
      expect(() => resolveRedlockOptions({ telemetry: 'on' })).toThrow(LockConfigError);
      expect(() => resolveRedlockOptions({ telemetry: 'on' })).toThrow(/"telemetry".*'auto'/);
    });
  });

  describe('metrics', () => {
    let measurements: Measurement[];
    let telemetry: LockTelemetry;
    beforeEach(() => {
      measurements = [];
      metrics.setGlobalMeterProvider(fakeMeterProvider(measurements));
      telemetry = LockTelemetry.start('auto')!;
    });

    it('records the wait and counts the outcome of each acquire, by group and result', () => {
      telemetry.record('acquired', acquired);
      telemetry.record('busy', { keys: ['k'], client, waitedMs: 500 });
      const down = new LockBackendError(['k'], [new Error('ECONNREFUSED')]);
      telemetry.record('error', { keys: ['k'], client, operation: 'acquire', error: down });
      const result = (r: string) => ({ 'lock.client': client, 'lock.result': r });
      expect(measurements).toEqual([
        {
          instrument: LOCK_METRICS.acquires,
          kind: 'counter',
          value: 1,
          attributes: result('acquired'),
        },
        {
          instrument: LOCK_METRICS.waitDuration,
          kind: 'histogram',
          value: 12,
          attributes: result('acquired'),
        },
        {
          instrument: LOCK_METRICS.acquires,
          kind: 'counter',
          value: 1,
          attributes: result('busy'),
        },
        {
          instrument: LOCK_METRICS.waitDuration,
          kind: 'histogram',
          value: 500,
          attributes: result('busy'),
        },
        {
          instrument: LOCK_METRICS.acquires,
          kind: 'counter',
          value: 1,
          attributes: result('error'),
        },
      ]);
    });

    it('records hold times and counts lost locks by reason; a failed release is no outcome', () => {
      telemetry.record('released', { keys: ['k'], client, fence: 41, heldMs: 250 });
      const lost = new LockLostError(['k'], 'expired');
      telemetry.record('lost', { keys: ['k'], client, fence: 41, error: lost });
      const failed = new LockBackendError(['k'], [new Error('timeout')], 'release');
      telemetry.record('error', { keys: ['k'], client, operation: 'release', error: failed });
      expect(measurements).toEqual([
        {
          instrument: LOCK_METRICS.holdDuration,
          kind: 'histogram',
          value: 250,
          attributes: { 'lock.client': client },
        },
        {
          instrument: LOCK_METRICS.lost,
          kind: 'counter',
          value: 1,
          attributes: { 'lock.client': client, 'lock.lost_reason': 'expired' },
        },
      ]);
    });
  });

  describe('spans', () => {
    let spans: FakeSpan[];
    let telemetry: LockTelemetry;
    beforeEach(() => {
      spans = [];
      context.setGlobalContextManager(new AlsContextManager());
      trace.setGlobalTracerProvider(fakeTracerProvider(spans));
      telemetry = LockTelemetry.start('auto')!;
    });

    it('wraps a locked call in an active span named after it, annotated by its lock events', async () => {
      const value = await telemetry.traced(
        'ProductService.buy',
        client,
        ['product:1'],
        async () => {
          expect(trace.getActiveSpan()).toBe(spans[0]);
          telemetry.record('acquired', acquired);
          return 'bought';
        },
      );
      expect(value).toBe('bought');
      expect(spans).toHaveLength(1);
      expect(spans[0]).toMatchObject({
        name: 'nest-locked ProductService.buy',
        ended: true,
        attributes: {
          'lock.client': client,
          'lock.keys': ['product:1'],
          'lock.result': 'acquired',
          'lock.fence': 41,
          'lock.waited_ms': 12,
        },
      });
      expect(spans[0].status).toBeUndefined();
    });

    it('marks the span failed when the call rejects, and still ends it', async () => {
      const down = new LockBackendError(['k'], [new Error('ECONNREFUSED')]);
      await expect(
        telemetry.traced('LockService.using', client, ['k'], () => Promise.reject(down)),
      ).rejects.toBe(down);
      expect(spans[0].ended).toBe(true);
      expect(spans[0].status).toEqual({ code: SpanStatusCode.ERROR, message: down.message });
      expect(spans[0].exceptions).toEqual([down]);
    });

    it('leaves spans it did not start alone (an acquire() inside an HTTP span)', () => {
      const tracer = trace.getTracer('app');
      const outer = tracer.startSpan('GET /orders') as unknown as FakeSpan;
      context.with(trace.setSpan(context.active(), outer as unknown as Span), () =>
        telemetry.record('acquired', acquired),
      );
      expect(outer.attributes).toEqual({});
    });
  });
});
