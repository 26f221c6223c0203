const WHITESPACE = /\s/;
const IDENT_START = /[\p{ID_Start}$_]/u;
const IDENT_PART = /[\p{ID_Continue}$\u200C\u200D]/u;
const CLOSERS: Readonly<Record<string, string>> = { '(': ')', '[': ']', '{': '}' };
/** After these, a "/" starts a regular expression rather than a division. */
const REGEX_AFTER = '(,=:[!&|?{};+-*%<>~^';

/**
 * A minimal JavaScript tokenizer: enough to skip literals, comments and nested groups while
 * reading a parameter list. Runs at decoration time only.
 */
export class SourceScanner {
  pos = 0;

  constructor(private readonly src: string) {}

  /** Skips whitespace and comments. */
  skipTrivia(): void {
    const src = this.src;
    while (this.pos < src.length) {
      const ch = src[this.pos];
      if (ch === '/' && src[this.pos + 1] === '/') {
        const end = src.indexOf('\n', this.pos + 2);
        this.pos = end < 0 ? src.length : end + 1;
      } else if (ch === '/' && src[this.pos + 1] === '*') {
        const end = src.indexOf('*/', this.pos + 2);
        this.pos = end < 0 ? src.length : end + 2;
      } else if (WHITESPACE.test(ch)) {
        this.pos++;
      } else {
        return;
      }
    }
  }

  /** Reads an identifier at the cursor, or returns undefined (cursor unchanged). */
  readIdentifier(): string | undefined {
    const src = this.src;
    const first = src.codePointAt(this.pos);
    if (first === undefined || !IDENT_START.test(String.fromCodePoint(first))) return undefined;
    const start = this.pos;
    this.pos += first > 0xffff ? 2 : 1;
    for (;;) {
      const cp = src.codePointAt(this.pos);
      if (cp === undefined || !IDENT_PART.test(String.fromCodePoint(cp))) break;
      this.pos += cp > 0xffff ? 2 : 1;
    }
    return src.slice(start, this.pos);
  }

  /** Skips a string or template literal starting at the cursor. */
  skipLiteral(): void {
    const src = this.src;
    const quote = src[this.pos++];
    while (this.pos < src.length) {
      const ch = src[this.pos];
      if (ch === '\\') {
        this.pos += 2;
      } else if (ch === quote) {
        this.pos++;
        return;
      } else if (quote === '`' && ch === '$' && src[this.pos + 1] === '{') {
        this.pos += 2;
        this.scanUntil('}');
        this.pos++;
      } else {
        this.pos++;
      }
    }
  }

  /** Skips a regular expression literal starting at the cursor (its flags read as code). */
  private skipRegex(): void {
    const src = this.src;
    let inClass = false;
    for (this.pos++; this.pos < src.length; this.pos++) {
      const ch = src[this.pos];
      if (ch === '\\') this.pos++;
      else if (ch === '[') inClass = true;
      else if (ch === ']') inClass = false;
      else if (ch === '/' && !inClass) {
        this.pos++;
        return;
      } else if (ch === '\n') return;
    }
  }

  /** Skips a balanced `(...)`, `[...]` or `{...}` group starting at the cursor. */
  skipGroup(): void {
    const close = CLOSERS[this.src[this.pos]] ?? '';
    this.pos++;
    this.scanUntil(close);
    this.pos++;
  }

  /**
   * Advances to the first character in `stops` outside any nested group or literal and returns
   * it, without consuming it ('' at the end of the source).
   */
  scanUntil(stops: string): string {
    const src = this.src;
    let previous = '='; // last significant character, for the regex heuristic
    for (;;) {
      this.skipTrivia();
      const ch = src[this.pos];
      if (ch === undefined) return '';
      if (stops.includes(ch)) return ch;
      if (ch === '"' || ch === "'" || ch === '`') {
        this.skipLiteral();
        previous = '"';
      } else if (ch === '(' || ch === '[' || ch === '{') {
        this.skipGroup();
        previous = ')';
      } else if (ch === '/' && REGEX_AFTER.includes(previous)) {
        this.skipRegex();
        previous = ')';
      } else {
        this.pos++;
        previous = ch;
      }
    }
  }
}
