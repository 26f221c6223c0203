import { createHash } from 'node:crypto';

/**
 * SHA-256 of a lock key (with its keyPrefix), for the databases whose lock names are short: a
 * PostgreSQL advisory lock is one 64-bit number, a MySQL `GET_LOCK` name at most 64 characters.
 * @internal
 */
export function keyDigest(name: string): Buffer {
  return createHash('sha256').update(name, 'utf8').digest();
}
