import { AsyncLocalStorage } from 'node:async_hooks';
import * as api from '@opentelemetry/api';
import {
  type Attributes,
  type Context,
  type ContextManager,
  context,
  type Meter,
  ROOT_CONTEXT,
  type Span,
  type SpanOptions,
  trace,
  type Tracer,
} from '@opentelemetry/api';

/*
 * Stand-ins for an OpenTelemetry SDK (not installed): providers registered through the API's own
 * hooks (metrics.setGlobalMeterProvider, trace.setGlobalTracerProvider,
 * context.setGlobalContextManager) that keep what they were given.
 */

/** What the fake meter saw: one entry per record() / add(). */
export interface Measurement {
  instrument: string;
  kind: 'histogram' | 'counter';
  value: number;
  attributes?: Attributes;
}

/** A MeterProvider that records every measurement (no SDK installed: the API's hooks only). */
export function fakeMeterProvider(measurements: Measurement[]): api.MeterProvider {
  const meter = {
    createHistogram: (instrument: string) => ({
      record: (value: number, attributes?: Attributes) =>
        measurements.push({ instrument, kind: 'histogram', value, attributes }),
    }),
    createCounter: (instrument: string) => ({
      add: (value: number, attributes?: Attributes) =>
        measurements.push({ instrument, kind: 'counter', value, attributes }),
    }),
  };
  return { getMeter: () => meter as unknown as Meter };
}

/** A span that keeps what was done to it. */
export class FakeSpan {
  attributes: Attributes = {};
  status?: api.SpanStatus;
  exceptions: unknown[] = [];
  ended = false;
  constructor(
    readonly name: string,
    options: SpanOptions,
  ) {
    Object.assign(this.attributes, options.attributes);
  }
  setAttributes(attributes: Attributes) {
    Object.assign(this.attributes, attributes);
    return this;
  }
  setStatus(status: api.SpanStatus) {
    this.status = status;
    return this;
  }
  recordException(exception: unknown) {
    this.exceptions.push(exception);
  }
  end() {
    this.ended = true;
  }
  spanContext() {
    return api.INVALID_SPAN_CONTEXT;
  }
}

/** A TracerProvider whose tracer makes FakeSpans and makes them active as the API says. */
export function fakeTracerProvider(spans: FakeSpan[]): api.TracerProvider {
  const tracer = {
    startSpan: (name: string, options: SpanOptions = {}) => {
      const span = new FakeSpan(name, options);
      spans.push(span);
      return span as unknown as Span;
    },
    startActiveSpan(name: string, options: SpanOptions, fn: (span: Span) => unknown) {
      const span = this.startSpan(name, options);
      return context.with(trace.setSpan(context.active(), span), fn, undefined, span);
    },
  };
  return { getTracer: () => tracer as unknown as Tracer };
}

/** The smallest context manager: AsyncLocalStorage, as the SDK's own does. */
export class AlsContextManager implements ContextManager {
  private readonly als = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.als.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.als.run(ctx, () => fn.apply(thisArg, args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.als.disable();
    return this;
  }
}
