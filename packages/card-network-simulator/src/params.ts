/**
 * A request's parameters as Stripe reads them: form-encoded, bracket notation
 * (`metadata[k]=v`), anything unlisted refused, and the 400s Stripe answers for
 * a missing, empty or malformed value.
 */
import { ApiError, invalid, noSuch } from './api';
import { Metadata } from './resources';

/** The largest `amount` Stripe takes, in minor units. */
export const MAX_AMOUNT = 99_999_999;

export interface ParsedParams {
  values: Map<string, string>;
  metadata: Metadata | undefined;
}

/** Stripe's bracket notation: `metadata[k]=v` goes into an object, anything unlisted is refused. */
export function parseParams(search: URLSearchParams, allowed: readonly string[], withMetadata: boolean): ParsedParams {
  const values = new Map<string, string>();
  let metadata: Metadata | undefined;
  for (const [name, value] of search) {
    const meta = withMetadata ? /^metadata\[([^[\]]+)\]$/.exec(name) : null;
    if (meta) {
      metadata ??= {};
      metadata[meta[1]] = value;
    } else if (allowed.includes(name)) {
      values.set(name, value);
    } else {
      throw invalid(`Received unknown parameter: ${name}`, 'parameter_unknown', name);
    }
  }
  return { values, metadata };
}

/**
 * Order-independent: the same parameters in any order give the same fingerprint.
 * Kept only as a keyed hash (see executePost), since a token's parameters hold a card number.
 */
export function fingerprint(method: string, path: string, params: ParsedParams): string {
  const byName = (a: [string, string], b: [string, string]) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
  return JSON.stringify([
    method,
    path,
    [...params.values].sort(byName),
    params.metadata ? Object.entries(params.metadata).sort(byName) : null,
  ]);
}

export function emptyRefused(name: string): ApiError {
  return invalid(
    `You passed an empty string for '${name}'. We assume empty values are an attempt to unset a parameter; however '${name}' cannot be unset.`,
    'parameter_invalid_empty',
    name,
  );
}

export function requiredString(params: ParsedParams, name: string): string {
  const value = params.values.get(name);
  if (value === undefined) throw invalid(`Missing required param: ${name}.`, 'parameter_missing', name);
  if (value === '') throw emptyRefused(name);
  return value;
}

export function integer(params: ParsedParams, name: string, min: number, max: number, tooSmallCode: string): number | undefined {
  const raw = params.values.get(name);
  if (raw === undefined) return undefined;
  if (!/^-?\d+$/.test(raw) || !Number.isSafeInteger(Number(raw))) {
    throw invalid(`Invalid integer: ${raw}`, 'parameter_invalid_integer', name);
  }
  const value = Number(raw);
  if (value < min) throw invalid(`This value must be greater than or equal to ${min}.`, tooSmallCode, name);
  if (value > max) throw invalid(`This value must be less than or equal to ${max}.`, name === 'amount' ? 'amount_too_large' : 'parameter_invalid_integer', name);
  return value;
}

export function boolean(params: ParsedParams, name: string): boolean {
  const raw = params.values.get(name);
  if (raw === undefined || raw === 'false') return false;
  if (raw === 'true') return true;
  throw invalid(`Invalid boolean: ${raw}`, 'parameter_invalid_boolean', name);
}

export function checkMetadata(metadata: Metadata | undefined): Metadata {
  const entries = Object.entries(metadata ?? {});
  if (entries.length > 50) throw invalid('Metadata can have at most 50 keys.', 'parameter_invalid_metadata', 'metadata');
  for (const [k, v] of entries) {
    if (k.length > 40) throw invalid(`Metadata keys can be at most 40 characters: ${k}`, 'parameter_invalid_metadata', `metadata[${k}]`);
    if (v.length > 500) throw invalid(`Metadata values can be at most 500 characters.`, 'parameter_invalid_metadata', `metadata[${k}]`);
  }
  return Object.fromEntries(entries);
}

/** Stripe's list: newest first, `limit` (1 to 100, default 10), `starting_after`, `has_more`. */
export function paginate<T extends { id: string }>(newestFirst: T[], params: ParsedParams, url: string, kind: string) {
  const limit = integer(params, 'limit', 1, 100, 'parameter_invalid_integer') ?? 10;
  let start = 0;
  const after = params.values.get('starting_after');
  if (after !== undefined) {
    const index = newestFirst.findIndex((item) => item.id === after);
    if (index < 0) throw noSuch(kind, after, 'starting_after');
    start = index + 1;
  }
  const data = newestFirst.slice(start, start + limit);
  return { object: 'list', url, data, has_more: start + limit < newestFirst.length };
}
