import { AddressInfo, Server, Socket, connect, createServer } from 'node:net';

/**
 * A TCP proxy that puts a network's distance between its clients and a server:
 * every chunk, in either direction, is passed on `oneWayMs` after it arrived,
 * in order. In front of PostgreSQL it turns the loopback's microseconds into
 * a round trip of a database in another zone (2 x oneWayMs per statement), so
 * a transaction holds its server connection for as long as it would there.
 */
export interface LatencyProxy {
  /** `url` with its host and port replaced by the proxy's. */
  url(url: string): string;
  close(): Promise<void>;
}

export async function startLatencyProxy(target: { host: string; port: number }, oneWayMs: number): Promise<LatencyProxy> {
  const sockets = new Set<Socket>();
  // Timers of one duration fire in the order they were set: the bytes keep their order.
  const relay = (from: Socket, to: Socket) =>
    from.on('data', (chunk: Buffer) => {
      setTimeout(() => {
        if (!to.destroyed) to.write(chunk);
      }, oneWayMs);
    });
  const server: Server = createServer((client) => {
    const upstream = connect(target.port, target.host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.setNoDelay(true);
      socket.on('close', () => {
        sockets.delete(socket);
        // The other side closes after the bytes in flight.
        setTimeout(() => (socket === client ? upstream : client).destroy(), oneWayMs + 1);
      });
      socket.on('error', () => socket.destroy());
    }
    relay(client, upstream);
    relay(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (url) => {
      const u = new URL(url);
      u.hostname = '127.0.0.1';
      u.port = String(port);
      return u.toString();
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
