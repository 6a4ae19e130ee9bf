import { isIP } from 'node:net';
import { z } from 'zod';
import { parseDuration } from './duration';

/**
 * The kinds of value an environment variable holds, each a zod schema from the
 * variable's text (or its default) to the typed value. A kind with a default
 * records it, as written, in its metadata (`default`), for the generated
 * reference. Their messages never echo a value that may be a secret.
 */

const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 * 1024 };

/** A duration (`500ms`, `30s`, `15m`, `24h`, `7d`, or milliseconds) in milliseconds, longer than 0 unless `zero` is allowed. */
export const duration = (fallback: string, { zero = false } = {}) =>
  z
    .string()
    .default(fallback)
    .transform((value, ctx) => {
      try {
        const ms = parseDuration(value);
        if (ms > 0 || zero) return ms;
        ctx.addIssue({ code: 'custom', message: 'must be longer than 0' });
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message });
      }
      return z.NEVER;
    })
    .meta({ default: fallback });

export const integer = (fallback: number, min: number, max: number) =>
  z
    .string()
    .default(String(fallback))
    .refine((v) => /^\d+$/.test(v.trim()), { message: `expected an integer between ${min} and ${max}` })
    .transform((v) => Number(v))
    .refine((v) => v >= min && v <= max, { message: `expected an integer between ${min} and ${max}` })
    .meta({ default: String(fallback) });

export const optionalPort = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()))
  .refine((v) => v === undefined || (/^\d+$/.test(v) && Number(v) >= 1 && Number(v) <= 65535), {
    message: 'expected a port between 1 and 65535',
  })
  .transform((v) => (v === undefined ? undefined : Number(v)));

/** A size in bytes (`512b`, `100kb`, `1mb`) of at least `min`. */
export const bytes = (fallback: string, min: number) =>
  z
    .string()
    .default(fallback)
    .transform((value, ctx) => {
      const match = /^(\d+)\s*(b|kb|mb)?$/i.exec(value.trim());
      if (!match) {
        ctx.addIssue({ code: 'custom', message: `invalid size "${value}": expected e.g. 512b, 100kb or 1mb` });
        return z.NEVER;
      }
      const size = Number(match[1]) * SIZE_UNITS[(match[2] ?? 'b').toLowerCase()];
      if (size < min) {
        ctx.addIssue({ code: 'custom', message: `must be at least ${min} byte${min === 1 ? '' : 's'}` });
        return z.NEVER;
      }
      return size;
    })
    .meta({ default: fallback });

/** Trimmed; unset or blank is undefined. */
const optionalText = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

/** Trimmed and optional, and when set it must match `pattern` (the message never echoes the value). */
export const optionalMatching = (pattern: RegExp, message: string) =>
  optionalText.refine((v) => v === undefined || pattern.test(v), { message });

export const POSTGRES_URL = /^postgres(ql)?:\/\//;

/** The trimmed, non-empty entries of a comma-separated list. */
export const commaList = (fallback = '') => {
  const list = z
    .string()
    .default(fallback)
    .transform((v) => v.split(',').map((entry) => entry.trim()).filter(Boolean));
  return fallback ? list.meta({ default: fallback }) : list;
};

export interface ApiKeySeed {
  name: string;
  secret: string;
}

/** `name:secret` pairs separated by commas: the API keys seeded at boot. */
export const apiKeys = z
  .string()
  .default('')
  .transform((value, ctx): ApiKeySeed[] => {
    const seeds: ApiKeySeed[] = [];
    for (const entry of value.split(',').map((e) => e.trim()).filter(Boolean)) {
      const separator = entry.indexOf(':');
      const name = entry.slice(0, separator).trim();
      const secret = entry.slice(separator + 1).trim();
      if (separator <= 0 || !name || secret.length < 16) {
        // Never echo the secret itself into an error message.
        ctx.addIssue({
          code: 'custom',
          message: `expected name:secret pairs separated by commas, each secret at least 16 characters (entry ${seeds.length + 1})`,
        });
        return z.NEVER;
      }
      if (seeds.some((s) => s.name === name)) {
        ctx.addIssue({ code: 'custom', message: `the client name "${name}" appears twice` });
        return z.NEVER;
      }
      seeds.push({ name, secret });
    }
    return seeds;
  });

/** A switch: on/off, true/false or 1/0. */
export const onOff = (fallback: boolean) =>
  z
    .string()
    .default(fallback ? 'on' : 'off')
    .refine((v) => ['on', 'off', 'true', 'false', '1', '0'].includes(v.trim().toLowerCase()), { message: 'expected on or off' })
    .transform((v) => ['on', 'true', '1'].includes(v.trim().toLowerCase()))
    .meta({ default: fallback ? 'on' : 'off' });

/** A switch that may be left unset (undefined): on/off, true/false or 1/0. */
export const optionalOnOff = optionalText
  .refine((v) => v === undefined || ['on', 'off', 'true', 'false', '1', '0'].includes(v.toLowerCase()), { message: 'expected on or off' })
  .transform((v) => (v === undefined ? undefined : ['on', 'true', '1'].includes(v.toLowerCase())));

/** `10.0.0.1`, `::1`, `10.0.0.0/8`, `fd00::/8`. */
export function isAddressOrCidr(value: string): boolean {
  const [address, bits, ...rest] = value.split('/');
  const family = isIP(address);
  if (!family || rest.length) return false;
  if (bits === undefined) return true;
  return /^\d{1,3}$/.test(bits) && Number(bits) <= (family === 4 ? 32 : 128);
}
