// Turns rlock's diagnostics_channel events into OpenTelemetry metrics: a wait-time histogram, a
// gauge of holds, and a lost-lock counter. Run: npx tsx examples/otel-metrics.ts
// (uses REDIS_URL, or starts a private redis-server). A real app would export to its collector
// instead of reading the metrics back as this example does.
import { subscribe } from 'node:diagnostics_channel';
import { metrics } from '@opentelemetry/api';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { LockClient } from '../src'; // in your app: from 'rlock'
import { redisFromEnv } from '../scripts/redisServer';

async function main(): Promise<void> {
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 });
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  const meter = metrics.getMeter('rlock-example');

  // The wiring: three instruments fed by the library's channels.
  const waitTime = meter.createHistogram('rlock.wait.duration', { unit: 'ms', description: 'time lock calls spent waiting' });
  const lost = meter.createCounter('rlock.lost', { description: 'locks lost while held' });
  let holds = 0;
  meter.createObservableGauge('rlock.holds', { description: 'holds taken and not yet given back' }).addCallback((result) => result.observe(holds));
  subscribe('rlock:wait:end', (message) => {
    const { name, durationMs, acquired } = message as { name: string; durationMs: number; acquired: boolean };
    waitTime.record(durationMs, { lock: name, acquired });
  });
  subscribe('rlock:acquired', () => holds++);
  subscribe('rlock:released', () => holds--);
  subscribe('rlock:lost', (message) => {
    const { name, holds: went } = message as { name: string; holds: number };
    holds -= went; // every hold the owner had of it went (2 for a reentrant hold)
    lost.add(1, { lock: name });
  });

  // Some work: two clients contend for one lock, and one lock is lost to a force-unlock.
  const redis = await redisFromEnv();
  const a = new LockClient({ redis: redis.url, watchdogTimeout: 300 });
  const b = new LockClient({ redis: redis.url, watchdogTimeout: 300 });
  try {
    await Promise.all(
      [a, b, a, b].map((client) => client.getLock('example:orders').withLock(() => new Promise((resolve) => setTimeout(resolve, 20)))),
    );
    const doomed = a.getLock('example:doomed');
    await doomed.lock();
    await b.getLock('example:doomed').forceUnlock();
    await new Promise((resolve) => setTimeout(resolve, 400)); // the watchdog notices
  } finally {
    await a.close();
    await b.close();
    await redis.stop();
  }

  await reader.forceFlush();
  for (const { scopeMetrics } of exporter.getMetrics()) {
    for (const { metrics: list } of scopeMetrics) {
      for (const metric of list) {
        for (const point of metric.dataPoints) {
          const value = typeof point.value === 'number' ? point.value : `count=${(point.value as { count: number }).count}`;
          console.log(`${metric.descriptor.name} ${JSON.stringify(point.attributes)} ${value}`);
        }
      }
    }
  }
  await reader.shutdown();
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
