import { LockKeyError } from '../errors';
import {
  KEY_PERCENT_AFTER_PLACEHOLDER,
  KEY_PLACEHOLDER_EMPTY,
  KEY_PLACEHOLDERS_ADJACENT,
  KEY_TEMPLATE_EMPTY,
  KEY_TEMPLATE_UNCLOSED,
  KEY_TEMPLATE_UNOPENED,
} from './key.messages';
import { type Site, tooLong, valueEncoder } from './key-encoding';
import { MAX_KEY_BYTES, utf8Length } from './key-length';
import type { ParamNames } from './param-names';
import { compilePlaceholder } from './placeholder';

/**
 * Splits a template into literal text and placeholder expressions, resolving `{{` and `}}`:
 * `literals[i]` comes before `placeholders[i]`, and the last literal ends the template.
 */
function parseTemplate(
  template: string,
  where: string,
): { literals: string[]; placeholders: string[] } {
  const literals: string[] = [];
  const placeholders: string[] = [];
  let text = '';
  for (let i = 0; i < template.length;) {
    const ch = template[i];
    if (ch === '{') {
      if (template[i + 1] === '{') {
        text += '{';
        i += 2;
        continue;
      }
      const close = template.indexOf('}', i + 1);
      const reopen = template.indexOf('{', i + 1);
      if (close < 0 || (reopen >= 0 && reopen < close)) {
        throw new LockKeyError(KEY_TEMPLATE_UNCLOSED(template, where, i), template);
      }
      const expr = template.slice(i + 1, close);
      if (expr === '') throw new LockKeyError(KEY_PLACEHOLDER_EMPTY(template, where), template, '');
      if (placeholders.length > 0) {
        // Text between two placeholders must tell where the first value ends (see compileTemplate).
        const left = placeholders[placeholders.length - 1];
        if (text === '') {
          const message = KEY_PLACEHOLDERS_ADJACENT(template, where, left, expr);
          throw new LockKeyError(message, template, expr);
        }
        if (text.startsWith('%')) {
          const message = KEY_PERCENT_AFTER_PLACEHOLDER(template, where, left);
          throw new LockKeyError(message, template, left);
        }
      }
      literals.push(text);
      placeholders.push(expr);
      text = '';
      i = close + 1;
    } else if (ch === '}') {
      if (template[i + 1] !== '}') {
        throw new LockKeyError(KEY_TEMPLATE_UNOPENED(template, where, i), template);
      }
      text += '}';
      i += 2;
    } else {
      text += ch;
      i++;
    }
  }
  literals.push(text);
  return { literals, placeholders };
}

/**
 * Compiles one template into the renderer of its key (see `compileKeySource`).
 *
 * @throws LockKeyError for a template that cannot be parsed or names what the method lacks.
 */
export function compileTemplate(
  template: string,
  where: string,
  getParams: () => ParamNames,
): (args: readonly unknown[]) => string {
  if (template === '') throw new LockKeyError(KEY_TEMPLATE_EMPTY(where), template);
  const { literals, placeholders } = parseTemplate(template, where);
  const accessors = placeholders.map((p) => compilePlaceholder(template, where, p, getParams));
  const sites: Site[] = placeholders.map((placeholder) => ({ template, where, placeholder }));
  const count = placeholders.length;
  // Rendering is injective: a value followed by more text never contains, outside a %XX triplet,
  // the character that starts the text between it and the next placeholder (valueEncoder), so a
  // key read left to right splits one way only: each value ends at that character, and the last
  // value is what remains before the final literal. The parser rejected the two cases where this
  // cannot hold: no text between placeholders, and text starting with '%', which starts triplets.
  const encoders = sites.map((site, i) =>
    valueEncoder(site, i + 1 < count ? literals[i + 1] : undefined),
  );

  const literalText = literals.join('');
  const literalBytes = utf8Length(literalText);
  // Encoded values are ASCII, so a key's byte length is its string length plus this.
  const extraBytes = literalBytes - literalText.length;
  const siteOf: Site = { template, where, placeholder: '' };
  if (literalBytes > MAX_KEY_BYTES) throw tooLong(siteOf, literalBytes, undefined);

  const check = (key: string, args: readonly unknown[]): string => {
    if (key.length + extraBytes <= MAX_KEY_BYTES) return key;
    // Error path only: name the biggest part, the one to shorten.
    const sizes = accessors.map((read, i) => encoders[i](read(args)).length);
    const longest = sizes.indexOf(Math.max(...sizes));
    throw tooLong(siteOf, key.length + extraBytes, sites[longest].placeholder);
  };

  if (count === 0) return () => literalText;
  if (count === 1) {
    const [before, after] = literals;
    const [read] = accessors;
    const [encode] = encoders;
    return (args) => check(before + encode(read(args)) + after, args);
  }
  if (count === 2) {
    const [l0, l1, l2] = literals;
    const [r0, r1] = accessors;
    const [e0, e1] = encoders;
    return (args) => check(l0 + e0(r0(args)) + l1 + e1(r1(args)) + l2, args);
  }
  return (args) => {
    let key = literals[0];
    for (let i = 0; i < count; i++) {
      key += encoders[i](accessors[i](args)) + literals[i + 1];
    }
    return check(key, args);
  };
}
