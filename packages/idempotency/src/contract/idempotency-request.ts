/**
 * What the module reads of a request: the same on Express and Fastify. The
 * functions of the options receive the platform's own request object; declare
 * them with its type (`(req: Request) => ...`, `(req: FastifyRequest) => ...`).
 */
export interface IdempotencyRequest {
  method: string;
  /** The path and query as received (Fastify and Express both set it). */
  url: string;
  /** Express: the URL before any router stripped a mount path. */
  originalUrl?: string;
  headers: Record<string, string | string[] | undefined>;
  body?: unknown;
}
