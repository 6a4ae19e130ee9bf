import { AddressInfo, Socket, createServer } from 'node:net';

/**
 * An endpoint that accepts every connection and answers one byte a second,
 * never a whole answer in any test's time: what a slow tenant's receiver looks
 * like to the relay. Counts the connections it holds, and the most at once.
 */
export class Tarpit {
  port = 0;
  open = 0;
  mostOpen = 0;
  private readonly sockets = new Set<Socket>();
  private readonly server = createServer((socket) => {
    this.sockets.add(socket);
    this.mostOpen = Math.max(this.mostOpen, ++this.open);
    const answer = 'HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nthanks';
    let sent = 0;
    const drip = setInterval(() => socket.write(answer[sent++ % answer.length]), 1_000);
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(drip);
      this.sockets.delete(socket);
      this.open--;
    });
  });

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  url(): string {
    return `http://127.0.0.1:${this.port}/hooks`;
  }

  /** Stops accepting and drops the connections it holds (their attempts fail at once). */
  close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
