/**
 * The few things the module does to a response, on Express and on Fastify alike:
 * set its status and headers, and read back a header or the status the handler
 * (or Nest, from `@HttpCode`) set. An Express response is a Node ServerResponse
 * (`setHeader`/`getHeader`); a Fastify reply keeps its own headers (`header()`,
 * `getHeader()`) and sends them over whatever was set on the raw response. Both
 * expose `statusCode` as a read/write property.
 */
interface ExpressLikeResponse {
  statusCode: number;
  setHeader(name: string, value: string): unknown;
  getHeader(name: string): unknown;
}

interface FastifyLikeReply {
  statusCode: number;
  raw: unknown;
  code(status: number): unknown;
  header(name: string, value: string): unknown;
  getHeader(name: string): unknown;
}

export class HttpResponse {
  private constructor(private readonly res: ExpressLikeResponse | FastifyLikeReply) {}

  /** Wraps the response object of the platform in use (what `switchToHttp().getResponse()` returns). */
  static of(response: unknown): HttpResponse {
    return new HttpResponse(response as ExpressLikeResponse | FastifyLikeReply);
  }

  get status(): number {
    return this.res.statusCode;
  }

  setStatus(status: number): this {
    if (isFastify(this.res)) this.res.code(status);
    else this.res.statusCode = status;
    return this;
  }

  setHeader(name: string, value: string): this {
    if (isFastify(this.res)) this.res.header(name, value);
    else this.res.setHeader(name, value);
    return this;
  }

  /** A header set so far, when it is a single string. */
  getHeader(name: string): string | undefined {
    const value = this.res.getHeader(name);
    return typeof value === 'string' ? value : undefined;
  }
}

function isFastify(res: ExpressLikeResponse | FastifyLikeReply): res is FastifyLikeReply {
  return typeof (res as Partial<FastifyLikeReply>).code === 'function' && 'raw' in res;
}
