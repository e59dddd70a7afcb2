import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Span } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import type { Dialect, StatementObserver } from './db/store.js';

/**
 * OpenTelemetry tracing, on when an OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, see config.ts), off otherwise: then nothing here runs, no hook is added and
 * no statement is timed. On, every request is a server span (its parent taken from a W3C `traceparent`), and every
 * statement the store runs is a client span under it; spans go in batches to the endpoint as OTLP/HTTP JSON.
 */
export interface TracingConfig {
  /** Where spans are sent: the full OTLP/HTTP traces URL (…/v1/traces). */
  endpoint: string;
  serviceName: string;
}

export interface Tracing {
  /** The store's statement observer: one span per statement. */
  onStatement: StatementObserver;
  /** Sends the spans still buffered and stops (shutdown). */
  shutdown(): Promise<void>;
}

const TRACER = 'corkboard';

/** Starts the SDK: registers the global tracer provider, the async-context manager and the W3C propagator. */
export function startTracing(config: TracingConfig, dialect: Dialect): Tracing {
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.serviceName }),
    // The exporter reads OTEL_EXPORTER_OTLP_HEADERS and _TIMEOUT itself; the processor OTEL_BSP_*, the provider
    // OTEL_TRACES_SAMPLER(_ARG).
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter({ url: config.endpoint }))],
  });
  provider.register();
  const tracer = trace.getTracer(TRACER);
  const system = dialect === 'postgres' ? 'postgresql' : 'sqlite';
  return {
    onStatement({ sql, startTime, durationMs, error }) {
      const span = tracer.startSpan(
        operationOf(sql),
        { kind: SpanKind.CLIENT, startTime, attributes: { 'db.system.name': system, 'db.query.text': sql } },
        context.active(),
      );
      if (error !== undefined) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      }
      span.end(startTime + durationMs);
    },
    shutdown: () => provider.shutdown(),
  };
}

/** A statement's span name: its first keyword (`SELECT`, `INSERT`, `BEGIN`, …), as the semantic conventions ask. */
function operationOf(sql: string): string {
  return /^\s*(?:with\b[\s\S]*?\)\s*)?([a-z]+)/i.exec(sql)?.[1]?.toUpperCase() ?? 'SQL';
}

/** A request's server span and the context its work runs in. */
export interface RequestTrace {
  span: Span;
  context: Context;
}

/** Starts the server span of a request, as a child of the caller's span when `headers` carry a `traceparent`. */
export function startRequestSpan(method: string, headers: Record<string, string | string[] | undefined>): RequestTrace {
  const parent = propagation.extract(ROOT_CONTEXT, headers);
  const span = trace.getTracer(TRACER).startSpan(method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': method } }, parent);
  return { span, context: trace.setSpan(parent, span) };
}

/** Ends a request's span, named by its method and route as the semantic conventions ask; a 5xx marks it failed. */
export function endRequestSpan({ span }: RequestTrace, method: string, route: string | undefined, status: number): void {
  if (route !== undefined) {
    span.updateName(`${method} ${route}`);
    span.setAttribute('http.route', route);
  }
  span.setAttribute('http.response.status_code', status);
  if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}
