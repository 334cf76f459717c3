import { Controller, Get, Header, Injectable } from '@nestjs/common';
import { Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The process's Prometheus registry: Node's default metrics, HTTP timings, and each app's own. */
@Injectable()
export class MetricsService {
  readonly registry = new Registry();
  readonly httpDuration: Histogram<'method' | 'route' | 'status'>;

  constructor() {
    // prom-client samples the event loop's delay every 10 ms by default, waking an idle process
    // 100 times a second, which costs every idle node CPU (docs/benchmarks.md). At 100 ms a 15-s
    // scrape still gets 150 samples for the lag percentiles.
    collectDefaultMetrics({ register: this.registry, prefix: 'tessera_', eventLoopMonitoringPrecision: 100 });
    this.httpDuration = new Histogram({
      name: 'tessera_http_request_duration_seconds',
      help: 'Requests served, over HTTP or the internal wire, by method, route pattern and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
      registers: [this.registry],
    });
  }
}

@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: MetricsService) {}

  @Get()
  @Header('content-type', 'text/plain; version=0.0.4; charset=utf-8')
  scrape(): Promise<string> {
    return this.metrics.registry.metrics();
  }
}
