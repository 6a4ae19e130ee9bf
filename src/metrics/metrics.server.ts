import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { Server, createServer } from 'node:http';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { MetricsAccess } from './metrics-access';
import { MetricsService } from './metrics.service';

/**
 * With METRICS_PORT, /metrics is served on its own listener (on every address
 * with METRICS_TOKEN, else loopback only), away from the API port a load
 * balancer exposes.
 * MetricsAccess decides who reads it, the same check as on the API port: in
 * the app, METRICS_TOKEN when set, a wrong or missing one a failed
 * authentication of the peer's address (the same budget as on the API port),
 * and an address over its budget gets 429 unless its token is right.
 */
@Injectable()
export class MetricsServer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(MetricsServer.name);
  private server?: Server;

  constructor(
    private readonly metrics: MetricsService,
    private readonly access: MetricsAccess,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const { port, host, token } = this.config.metrics;
    if (port === undefined) return;
    const server = createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0];
      if (req.method !== 'GET' || path !== '/metrics') {
        res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
        return;
      }
      const verdict = this.access.check(req.headers.authorization, req.socket.remoteAddress ?? 'unknown');
      if (verdict === 'allowed') {
        this.metrics.registry.metrics().then(
          (text) => res.writeHead(200, { 'Content-Type': this.metrics.registry.contentType, 'Cache-Control': 'no-store' }).end(text),
          () => res.writeHead(500).end(),
        );
      } else if (verdict === 'unauthorized') {
        res.writeHead(401, { 'Content-Type': 'text/plain', 'WWW-Authenticate': 'Bearer' }).end('unauthorized\n');
      } else {
        res.writeHead(429, { 'Content-Type': 'text/plain', 'Retry-After': String(verdict.retryAfterSeconds) }).end('too many failed authentications\n');
      }
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    this.server = server;
    this.logger.log(`metrics on http://${host}:${port}/metrics${token ? ' (token required)' : ''}`);
  }

  async onApplicationShutdown(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeAllConnections(); // a scraper's keep-alive connection must not hold the shutdown
    await closed;
  }
}
