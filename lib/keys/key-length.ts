/**
 * Longest key accepted, in UTF-8 bytes. Redis would take far longer keys, but a key this long
 * almost always means a whole payload ended up in it, which costs memory and bandwidth on every
 * acquire and renewal; lock on an id or a hash instead.
 */
export const MAX_KEY_BYTES = 1024;

/** UTF-8 length, counting a lone surrogate as 3 bytes (as Buffer.byteLength does). */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) bytes += 1;
    else if (c >= 0xd800 && c <= 0xdbff && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      bytes += 2; // 4 bytes for 2 code units
      i++;
    } else bytes += 2;
  }
  return bytes;
}
