import { LockKeyError } from '../errors';
import { KEY_BAD_VALUE, KEY_TOO_LONG } from './key.messages';
import { MAX_KEY_BYTES } from './key-length';

/** Where a placeholder sits, for error messages (only read on the error path). */
export interface Site {
  readonly template: string;
  readonly where: string | undefined;
  readonly placeholder: string;
}

/**
 * Encodes one placeholder value. Only scalars with an unambiguous text form are accepted:
 * anything else (`undefined`, `null`, `''`, `NaN`, objects...) would make every caller render the
 * same key, turning a per-entity lock into a global one, so it throws instead.
 *
 * Encoding is injective: `%` itself is encoded, so distinct values never render alike, and no
 * value can contain the `:` that separates segments. Numbers render with `String(n)`, so `42` and
 * `'42'` lock the same key, on purpose (a route param and a parsed body field agree).
 *
 * This is the encoding of a value that ends its key; inside a template, a value followed by more
 * text also encodes the first character of that text (see {@link valueEncoder}).
 *
 * @throws LockKeyError naming `template` and `placeholder`, with `.placeholder` set.
 */
export function encodeKeyValue(value: unknown, template: string, placeholder: string): string {
  return encodeValue(value, { template, where: undefined, placeholder }, ESCAPE);
}

/** ASCII characters every value encodes (1 = percent-encode). */
const ESCAPE = new Uint8Array(128);
for (let c = 0; c <= 0x20; c++) ESCAPE[c] = 1; // control characters and space
ESCAPE[0x7f] = 1;
for (const ch of '%:{}*?[]\\') ESCAPE[ch.charCodeAt(0)] = 1;

/**
 * The encoder of one placeholder's values. `next` is the literal text that follows the value in
 * its template, if another placeholder comes after it: its first character is encoded too, so the
 * value ends exactly where `next` begins (an encoded value is a run of verbatim characters and
 * `%XX` triplets, so that character, met outside a triplet, can only be where `next` starts).
 * `next` must not start with `%`, which every encoded value may contain.
 */
export function valueEncoder(site: Site, next?: string): (value: unknown) => string {
  const stop = next === undefined ? 0x80 : next.charCodeAt(0);
  let escape = ESCAPE;
  if (stop <= 0x7f && ESCAPE[stop] === 0) {
    escape = ESCAPE.slice();
    escape[stop] = 1;
  }
  return (value) => encodeValue(value, site, escape);
}

/** `%XX` for every byte, uppercase hex. */
const HEX: readonly string[] = Array.from(
  { length: 256 },
  (_, b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`,
);

/** Encodes one value for `site`, percent-encoding the ASCII characters marked in `escape`. */
function encodeValue(value: unknown, site: Site, escape: Uint8Array): string {
  switch (typeof value) {
    case 'string':
      if (value.length === 0) break;
      if (value.length > MAX_KEY_BYTES) throw tooLong(site, undefined, site.placeholder);
      return escapeString(value, site, escape);
    case 'number':
      if (Number.isFinite(value)) return escapeScalar(String(value), site, escape); // '0' for -0
      break;
    case 'bigint':
      return escapeScalar(String(value), site, escape);
    case 'boolean':
      return escapeScalar(value ? 'true' : 'false', site, escape);
  }
  throw new LockKeyError(
    KEY_BAD_VALUE(site.template, site.where, site.placeholder, value),
    site.template,
    site.placeholder,
  );
}

/**
 * Number, bigint and boolean text (digits, `-`, `.`, `e`, `+`, letters) holds no character of the
 * base set, but may hold the one a template adds: `x:{a}.{b}` must not render (1.5, 2) and
 * (1, 5.2) alike. It is encoded as a string is, so `1.5` and `'1.5'` stay the same key.
 */
function escapeScalar(text: string, site: Site, escape: Uint8Array): string {
  return escape === ESCAPE ? text : escapeString(text, site, escape);
}

function escapeString(value: string, site: Site, escape: Uint8Array): string {
  const length = value.length;
  let i = 0;
  for (; i < length; i++) {
    const c = value.charCodeAt(i);
    if (c > 0x7f || escape[c] === 1) break;
  }
  if (i === length) return value;

  let out = value.slice(0, i);
  let run = i; // start of the current verbatim run
  for (; i < length; i++) {
    let c = value.charCodeAt(i);
    if (c <= 0x7f && escape[c] === 0) continue;
    if (run < i) out += value.slice(run, i);
    if (c <= 0x7f) {
      out += HEX[c];
    } else if (c < 0x800) {
      out += HEX[0xc0 | (c >> 6)] + HEX[0x80 | (c & 0x3f)];
    } else {
      const next = value.charCodeAt(i + 1);
      if (c >= 0xd800 && c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
        i++;
        out +=
          HEX[0xf0 | (c >> 18)] +
          HEX[0x80 | ((c >> 12) & 0x3f)] +
          HEX[0x80 | ((c >> 6) & 0x3f)] +
          HEX[0x80 | (c & 0x3f)];
      } else {
        // A lone surrogate is encoded as its own code point (WTF-8) rather than as U+FFFD, so
        // it cannot collide with a real U+FFFD.
        out += HEX[0xe0 | (c >> 12)] + HEX[0x80 | ((c >> 6) & 0x3f)] + HEX[0x80 | (c & 0x3f)];
      }
    }
    run = i + 1;
  }
  if (run < length) out += value.slice(run);
  if (out.length > MAX_KEY_BYTES) throw tooLong(site, undefined, site.placeholder);
  return out;
}

/** The key, or the value of `placeholder` alone when `bytes` is undefined, is over the limit. */
export function tooLong(site: Site, bytes: number | undefined, placeholder: string | undefined) {
  return new LockKeyError(
    KEY_TOO_LONG(site.template, site.where, MAX_KEY_BYTES, bytes, placeholder),
    site.template,
    placeholder,
  );
}
