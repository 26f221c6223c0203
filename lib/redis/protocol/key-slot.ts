/**
 * The Redis Cluster hash slot of a key: CRC16 (XMODEM: polynomial 0x1021, initial value 0) of
 * the key, or of its hash tag (what lies between the first `{` and the next `}`, when that is
 * not empty), modulo 16384. Scripts may only touch keys of one slot on a Cluster.
 * @internal
 */
export const CLUSTER_SLOTS = 16384;

export function keySlot(key: string): number {
  const open = key.indexOf('{');
  let hashed = key;
  if (open >= 0) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) hashed = key.slice(open + 1, close);
  }
  return crc16(Buffer.from(hashed, 'utf8')) % CLUSTER_SLOTS;
}

function crc16(bytes: Uint8Array): number {
  let crc = 0;
  for (const byte of bytes) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) {
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
  }
  return crc;
}
