import { connect } from 'node:net';

/** What a raw socket received before it closed. */
export interface SlowSocketResult {
  /** The status of the first response, 0 when none came. */
  status: number;
  /** Everything received, headers included. */
  text: string;
  /** performance.now() when the socket closed. */
  closed: number;
}

export interface SlowSocket {
  /** Settles when the server closes the connection (or the socket fails). */
  result: Promise<SlowSocketResult>;
  destroy(): void;
}

/**
 * A client that sends a request's headers with `Content-Length: contentLength`,
 * then its body one byte every `intervalMs` (a slow-body attacker, or a client
 * on a dying link). The trickle stops when the server closes the connection.
 */
export function slowBody(
  baseUrl: string,
  { path, headers = {}, contentLength = 1000, intervalMs = 2_000 }: { path: string; headers?: Record<string, string>; contentLength?: number; intervalMs?: number },
): SlowSocket {
  const url = new URL(baseUrl);
  const socket = connect(Number(url.port), url.hostname);
  const lines = [`POST ${path} HTTP/1.1`, `Host: ${url.host}`, 'Content-Type: application/json', `Content-Length: ${contentLength}`];
  for (const [name, value] of Object.entries(headers)) lines.push(`${name}: ${value}`);
  socket.write(`${lines.join('\r\n')}\r\n\r\n`);
  let sent = 0;
  const trickle = setInterval(() => {
    if (sent < contentLength - 1 && socket.writable) {
      sent++;
      socket.write(' ');
    }
  }, intervalMs);
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  const result = new Promise<SlowSocketResult>((resolve) => {
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearInterval(trickle);
      const text = Buffer.concat(chunks).toString('utf8');
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text, closed: performance.now() });
    });
  });
  return {
    result,
    destroy: () => {
      clearInterval(trickle);
      socket.destroy();
    },
  };
}

/** The JSON body of a raw response's text. */
export function bodyOf<T = Record<string, unknown>>(text: string): T {
  return JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as T;
}
