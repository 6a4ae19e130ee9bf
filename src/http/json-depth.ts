import secureJson from 'secure-json-parse';
import { ProblemException } from './problem';

/**
 * The deepest JSON body accepted. Our bodies nest three levels (an order's
 * items); the cap keeps every recursive walk of a body (JSON.parse, the
 * fingerprint, class-transformer, class-validator) far from the stack limit:
 * 10 KB of `[[[[…` would otherwise exhaust the stack (a 500).
 */
export const MAX_JSON_DEPTH = 32;

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

const invalidJson = (detail: string) => new ProblemException({ status: 400, code: 'invalid_json', title: 'Invalid JSON', detail });

/**
 * A JSON request body from its raw bytes: the depth is checked before the
 * parse, so a too-deep body is refused (400 invalid_json) before anything
 * walks it. The parse is secure-json-parse's: a `__proto__` key, or a
 * `constructor` object with a `prototype` key, at any depth, is refused
 * (400 invalid_json) before the body reaches a merge, class-transformer or the
 * fingerprint, where such a key could reach an object's prototype. As a JSON
 * body parser in strict mode: an empty body is `{}`, and only an object or an
 * array is accepted at the top.
 */
export function parseJsonBody(body: Buffer, maxDepth = MAX_JSON_DEPTH): unknown {
  let start = 0;
  while (start < body.length && (body[start] === 0x20 || body[start] === 0x09 || body[start] === 0x0a || body[start] === 0x0d)) start++;
  if (start === body.length) return {};
  if (body[start] !== 0x7b && body[start] !== 0x5b) throw invalidJson('The request body is not valid JSON.');
  if (jsonDepth(body, maxDepth) > maxDepth) throw invalidJson(`The request body nests deeper than ${maxDepth} levels.`);
  let value: unknown;
  try {
    // `safe`: a forbidden key answers null (documented) rather than a SyntaxError like a malformed text's.
    value = secureJson.parse(body.toString('utf8'), { protoAction: 'error', constructorAction: 'error', safe: true }) as unknown;
  } catch {
    throw invalidJson('The request body is not valid JSON.');
  }
  // The top is an object or an array (checked above): null here is only the forbidden key.
  if (value === null) throw invalidJson('The request body has a __proto__ or constructor.prototype key.');
  return value;
}
