import { BadRequestException } from '@nestjs/common';

/**
 * Tiny input checks for the sample (it has no class-validator): each returns the clean value or
 * throws a 400 whose message names the field and what was wrong with it.
 */

const show = (value: unknown): string =>
  value === undefined ? 'nothing' : typeof value === 'string' ? `"${value}"` : String(value);

/** An integer in [min, max]; numeric strings are accepted (form posts); absent -> `fallback`. */
export function intField(
  value: unknown,
  name: string,
  { min, max, fallback }: { min: number; max: number; fallback?: number },
): number {
  if ((value === undefined || value === null) && fallback !== undefined) return fallback;
  const n = typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
    throw new BadRequestException(`${name} must be an integer ${range}, got ${show(value)}.`);
  }
  return n;
}

const ID = /^[A-Za-z0-9_-]{1,64}$/;

/** One of `values` (a query parameter such as `?mode=`); absent or empty -> `fallback`. */
export function oneOf<T extends string>(
  value: string | undefined,
  name: string,
  values: readonly T[],
  fallback: T,
): T {
  if (value === undefined || value === '') return fallback;
  if (!(values as readonly string[]).includes(value)) {
    throw new BadRequestException(`${name} must be one of ${values.join(', ')}, got "${value}".`);
  }
  return value as T;
}

/** A short identifier: letters, digits, `_` and `-`, 1 to 64 of them. */
export function idField(value: unknown, name: string): string {
  if (typeof value !== 'string' || !ID.test(value)) {
    throw new BadRequestException(
      `${name} must be 1 to 64 letters, digits, "_" or "-", got ${show(value)}.`,
    );
  }
  return value;
}

/** An optional non-empty display name of at most 100 characters. */
export function nameField(value: unknown, name: string, fallback: string): string {
  if (value === undefined || value === null) return fallback;
  if (typeof value !== 'string' || value.trim() === '' || value.length > 100) {
    throw new BadRequestException(`${name} must be a non-empty string of at most 100 characters.`);
  }
  return value.trim();
}

/** A request body that is a JSON object (or nothing, read as `{}`). */
export function bodyObject(body: unknown): Record<string, unknown> {
  if (body === undefined || body === null || body === '') return {};
  if (typeof body !== 'object' || Array.isArray(body)) {
    throw new BadRequestException('The request body must be a JSON object.');
  }
  return body as Record<string, unknown>;
}
