import { Inject, Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { Server, createServer } from 'node:http';
import { APP_CONFIG } from '../config/config.module';
import type { AppConfig } from '../config/config';
import { isMetricsTokenValid } from './metrics-access';
import { MetricsService } from './metrics.service';

/**
 * With METRICS_PORT, /metrics is served on its own listener (loopback unless
 * METRICS_HOST says otherwise), away from the API port a load balancer exposes.
 * METRICS_TOKEN, when set, is required there too.
 */
@Injectable()
export class MetricsServer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger(MetricsServer.name);
  private server?: Server;

  constructor(
    private readonly metrics: MetricsService,
    @Inject(APP_CONFIG) private readonly config: AppConfig,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    const { port, host, token } = this.config.metrics;
    if (port === undefined) return;
    const server = createServer((req, res) => {
      const path = (req.url ?? '').split('?')[0];
      if (req.method !== 'GET' || path !== '/metrics') {
        res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
      } else if (token !== undefined && !isMetricsTokenValid(req.headers.authorization, token)) {
        res.writeHead(401, { 'Content-Type': 'text/plain', 'WWW-Authenticate': 'Bearer' }).end('unauthorized\n');
      } else {
        this.metrics.registry.metrics().then(
          (text) => res.writeHead(200, { 'Content-Type': this.metrics.registry.contentType, 'Cache-Control': 'no-store' }).end(text),
          () => res.writeHead(500).end(),
        );
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
