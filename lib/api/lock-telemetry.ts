import type * as OTel from '@opentelemetry/api';
import { LockConfigError } from '../errors';
import { loadOptionalPeer } from '../optional-peer';
import { TELEMETRY_NEEDS_OTEL } from './api.messages';
import { LOCK_METRICS } from './lock-metrics';
import type { LockEventName, LockEventPayload, LockEventSink } from './lock-events';

type OTelApi = typeof OTel;

/** The `telemetry` module option: on, off, or on when an OpenTelemetry SDK is registered. */
export type TelemetryMode = boolean | 'auto';

/** Instrumentation scope of the meter and the tracer. @internal */
export const TELEMETRY_SCOPE = 'nest-locked';

type Result = 'acquired' | 'busy' | 'error';

/** A group's attribute sets, built once (recording must not allocate them per call). */
interface GroupAttributes {
  readonly client: OTel.Attributes;
  readonly results: Readonly<Record<Result, OTel.Attributes>>;
}

/**
 * Metrics and spans through `@opentelemetry/api`, loaded only when installed. Started once, when
 * the module starts: without the package, with `telemetry: false`, or (`'auto'`) with neither a
 * global MeterProvider nor a TracerProvider registered by then, there is no `LockTelemetry` at
 * all and lock calls pay nothing.
 * @internal
 */
export class LockTelemetry implements LockEventSink {
  private readonly groups = new Map<string, GroupAttributes>();
  /** Spans of locked calls in progress: lock events annotate only these. */
  private readonly spans = new WeakSet<OTel.Span>();
  private readonly waitDuration?: OTel.Histogram;
  private readonly holdDuration?: OTel.Histogram;
  private readonly acquires?: OTel.Counter;
  private readonly lostLocks?: OTel.Counter;

  /**
   * The telemetry `mode` asks for, or undefined when there is nothing to record.
   * @throws LockConfigError `telemetry: true` without `@opentelemetry/api` installed
   */
  static start(
    mode: TelemetryMode,
    load: () => OTelApi | undefined = () => loadOptionalPeer<OTelApi>('@opentelemetry/api'),
  ): LockTelemetry | undefined {
    if (mode === false) return undefined;
    const api = load();
    if (!api) {
      if (mode === true) throw new LockConfigError(TELEMETRY_NEEDS_OTEL, 'telemetry');
      return undefined;
    }
    // No global provider: metrics get the API's no-op meter, traces a proxy without a delegate.
    const meter = api.metrics.getMeter(TELEMETRY_SCOPE);
    const metering = mode === true || meter !== api.createNoopMeter();
    const provider = api.trace.getTracerProvider();
    const tracing =
      mode === true ||
      !(provider instanceof api.ProxyTracerProvider) ||
      provider.getDelegateTracer(TELEMETRY_SCOPE) !== undefined;
    if (!metering && !tracing) return undefined;
    return new LockTelemetry(
      api,
      metering ? meter : undefined,
      tracing ? api.trace.getTracer(TELEMETRY_SCOPE) : undefined,
    );
  }

  private constructor(
    private readonly api: OTelApi,
    meter: OTel.Meter | undefined,
    private readonly tracer: OTel.Tracer | undefined,
  ) {
    if (!meter) return;
    this.waitDuration = meter.createHistogram(LOCK_METRICS.waitDuration, {
      unit: 'ms',
      description: 'How long calls waited for a lock',
    });
    this.holdDuration = meter.createHistogram(LOCK_METRICS.holdDuration, {
      unit: 'ms',
      description: 'How long locks were held',
    });
    this.acquires = meter.createCounter(LOCK_METRICS.acquires, {
      description: 'Lock acquire outcomes, by lock.result',
    });
    this.lostLocks = meter.createCounter(LOCK_METRICS.lost, {
      description: 'Locks lost while held, by lock.lost_reason',
    });
  }

  /** Whether locked calls get a span. */
  get tracing(): boolean {
    return this.tracer !== undefined;
  }

  record<E extends LockEventName>(event: E, payload: LockEventPayload<E>): void {
    const e = payload as LockEventPayload<LockEventName>;
    const group = this.group(e.client);
    switch (event) {
      case 'acquired': {
        const { waitedMs, fence } = payload as LockEventPayload<'acquired'>;
        this.outcome(group, 'acquired', waitedMs);
        this.annotate({
          'lock.result': 'acquired',
          'lock.fence': fence,
          'lock.waited_ms': waitedMs,
        });
        break;
      }
      case 'busy': {
        const { waitedMs } = payload as LockEventPayload<'busy'>;
        this.outcome(group, 'busy', waitedMs);
        this.annotate({ 'lock.result': 'busy', 'lock.waited_ms': waitedMs });
        break;
      }
      case 'error':
        if ((payload as LockEventPayload<'error'>).operation !== 'acquire') break;
        this.outcome(group, 'error');
        this.annotate({ 'lock.result': 'error' });
        break;
      case 'released':
        this.holdDuration?.record((payload as LockEventPayload<'released'>).heldMs, group.client);
        break;
      case 'lost':
        this.lostLocks?.add(1, {
          ...group.client,
          'lock.lost_reason': (payload as LockEventPayload<'lost'>).error.reason,
        });
        break;
    }
  }

  /**
   * Runs a locked call (`run`: lock, method, unlock) inside a span `nest-locked <name>`, the
   * active span while it runs, so the method's own spans are its children. A rejection marks it
   * failed.
   */
  traced<T>(
    name: string,
    client: string,
    keys: readonly string[],
    run: () => Promise<T>,
  ): Promise<T> {
    const tracer = this.tracer;
    if (!tracer) return run();
    const attributes = { 'lock.client': client, 'lock.keys': [...keys] };
    return tracer.startActiveSpan(`nest-locked ${name}`, { attributes }, (span) => {
      this.spans.add(span);
      return run().then(
        (value) => {
          span.end();
          return value;
        },
        (err: unknown) => {
          const error = err instanceof Error ? err : new Error(String(err));
          span.recordException(error);
          span.setStatus({ code: this.api.SpanStatusCode.ERROR, message: error.message });
          span.end();
          throw err;
        },
      );
    });
  }

  private outcome(group: GroupAttributes, result: Result, waitedMs?: number): void {
    const attributes = group.results[result];
    this.acquires?.add(1, attributes);
    if (waitedMs !== undefined) this.waitDuration?.record(waitedMs, attributes);
  }

  /** Adds what the lock call learnt to its span (only ours: not a caller's HTTP span). */
  private annotate(attributes: OTel.Attributes): void {
    if (!this.tracer) return;
    const span = this.api.trace.getActiveSpan();
    if (span && this.spans.has(span)) span.setAttributes(attributes);
  }

  private group(client: string): GroupAttributes {
    let group = this.groups.get(client);
    if (!group) {
      const of = (result: Result) => ({ 'lock.client': client, 'lock.result': result });
      group = {
        client: { 'lock.client': client },
        results: { acquired: of('acquired'), busy: of('busy'), error: of('error') },
      };
      this.groups.set(client, group);
    }
    return group;
  }
}
