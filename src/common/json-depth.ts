import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The deepest JSON body accepted. Our bodies nest three levels (an order's
 * items); the cap keeps every recursive walk of a body (JSON.parse, the
 * fingerprint, class-transformer, class-validator) far from the stack limit:
 * 10 KB of `[[[[…` used to end in a 500.
 */
export const MAX_JSON_DEPTH = 32;

/** The `type` of the body-parser error raised for a too-deep body (see ProblemDetailsFilter). */
export const JSON_TOO_DEEP = 'entity.too.deep';

/** The nesting depth of a JSON text, counted on its bytes (structural characters are ASCII in UTF-8); stops past `limit`. */
export function jsonDepth(body: Buffer, limit = Infinity): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (inString) {
      if (c === 0x5c) i++; // a backslash escapes the next byte
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max && (max = depth) > limit) return max;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return max;
}

/**
 * body-parser's `verify` hook: it runs on the raw bytes before JSON.parse, so a
 * too-deep body is refused (400 invalid_json) before anything walks it.
 */
export function refuseDeepJson(maxDepth = MAX_JSON_DEPTH) {
  return (_req: IncomingMessage, _res: ServerResponse, body: Buffer): void => {
    if (jsonDepth(body, maxDepth) > maxDepth) {
      throw Object.assign(new Error(`The request body nests deeper than ${maxDepth} levels.`), { status: 400, type: JSON_TOO_DEEP });
    }
  };
}
