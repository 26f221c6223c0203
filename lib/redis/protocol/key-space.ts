/**
 * Every Redis name of the lock protocol, and the format of its messages, in one place. The Lua
 * in `lua/` takes its channel names and message words from the constants below (see
 * `scripts.ts`).
 *
 * Per lock key, six Redis keys sharing one Cluster hash tag (`{<key>}`), in this order (the
 * order the full scripts take them in):
 *   `<prefix>{<key>}`        the lock, value = the holder's token, with a PX lease; while shared
 *                            holders exist, a marker no token can equal (`\0r` readers, `\0<N>`
 *                            permits of N) living as long as the longest of their leases
 *   `<prefix>{<key>}:fence`  the fencing counter
 *   `<prefix>{<key>}:wait`   set while anyone waits (queued or racing)
 *   `<prefix>{<key>}:q`      waiting process heads in arrival order (zset)
 *   `<prefix>{<key>}:qm`     per queued token: "<lease ms>:<deadline ms>[:r|:<N>]" (hash)
 *   `<prefix>{<key>}:h`      shared holders: token -> lease end in server ms (zset)
 * The lock board (`nest-locked/board`, only when imported) keeps per group, under one hash tag:
 *   `<prefix>board:{<group>}:instances`     instances publishing: id -> expiry in ms (zset)
 *   `<prefix>board:{<group>}:i:<instance>`  one instance's view, JSON, with a PX expiry
 *   `<prefix>board:{<group>}:events`        recent lost / expired / error / forced events (capped
 *                                           stream, expires when idle)
 *   `<prefix>board:{<group>}:busy`          recent busy events, apart: a storm of them must not
 *                                           push the rare ones out
 *   `<prefix>board:{<group>}:watched`       set (with a short PX) while a page is open: instances
 *                                           then publish more often
 * Channels: `<prefix>{<key>}:rel` carries `r` when a release frees a key racing waiters wait for;
 * `nest-locked:g:<token prefix>` carries `g <token> <fence> <spare> <lock key>` when a release
 * grants a key to a token the process with that token prefix queued, and `w <lock key>` when a
 * waiter of another process queues for a key a token of that process holds.
 * @internal
 */

/** Suffix of a key's release channel. */
export const RELEASE_CHANNEL_SUFFIX = ':rel';
/** The message on a release channel: the key is free. */
export const RELEASED_MESSAGE = 'r';
/** Prefix of a process's grant channel (followed by its token prefix). */
export const GRANT_CHANNEL_PREFIX = 'nest-locked:g:';
/** First word of a grant message. */
export const GRANT_WORD = 'g';
/**
 * First word of a waiter notice on a grant channel (`w <lock key>`): a waiter of another process
 * queued for a key that process holds (a writer behind its readers' share, or any waiter behind
 * its exclusive hold).
 */
export const WRITER_WORD = 'w';
/** Separates a token's process prefix from its counter. */
export const TOKEN_SEPARATOR = '.';
/**
 * First character of a lock's value while shared holders hold it (`lua/includes/marker-of.lua`),
 * followed by the kind: `r` readers, N permits of N. No token starts with it.
 */
export const SHARED_MARKER = '\0';
/** The names and words above, as the Lua scripts take them (`$NAME`: see `scripts.ts`). */
export const PROTOCOL_WORDS = {
  RELEASE_CHANNEL_SUFFIX,
  RELEASED_MESSAGE,
  GRANT_CHANNEL_PREFIX,
  GRANT_WORD,
  WRITER_WORD,
  TOKEN_SEPARATOR,
} as const;

/** Suffix of a key's queue (the lock key, then this). */
const QUEUE_SUFFIX = ':q';

/** Redis keys per lock key in the full scripts. */
export const KEYS_PER_LOCK = 6;

/** A grant for one of this process's tokens, decoded. */
export interface Grant {
  /** The lock key (without prefix and hash tag). */
  readonly key: string;
  readonly token: string;
  readonly fence: number;
  /** Fences reserved after `fence` for local handoffs. */
  readonly spare: number;
}

/** The script keys of one lock key, built once: the same come back at every cycle. */
export interface KeySet {
  /** Lock, fence, wait flag, queue, queue meta, shared holders: what the full scripts take. */
  readonly all: string[];
  /** Lock and fence: TRY's and TAKE_ANY's. */
  readonly take: string[];
}

/**
 * Key sets remembered (the cache is emptied when full: bounded memory, ~0.6 KiB a key). Above the
 * keys in use at once it is rebuilt at every call: at 512 with 1,024 callers on their own keys,
 * the JS cost per cycle was ~1.6 x that at 2,048 (six strings and three arrays per miss).
 */
const KEY_SET_CACHE = 2048;

/**
 * Names of one client group: lock keys and their companions, channels, grant messages.
 * @internal
 */
export class KeySpace {
  private readonly keySets = new Map<string, KeySet>();
  private readonly open: string;

  /** @param clustered Redis Cluster: keys of different slots go in separate scripts */
  constructor(
    readonly prefix: string,
    private readonly clustered: boolean,
  ) {
    this.open = `${prefix}{`;
  }

  /** The Redis key of a lock: `<prefix>{<key>}`. */
  lockKey(key: string): string {
    return `${this.open}${key}}`;
  }

  /** The lock key back from its Redis key, or undefined if it is not one of this group's. */
  keyOf(lockKey: string): string | undefined {
    if (!lockKey.startsWith(this.open) || !lockKey.endsWith('}')) return undefined;
    return lockKey.slice(this.open.length, -1);
  }

  /** The queue, queue meta and shared holders of a key, without the key-set cache (board reads). */
  lineKeys(key: string): { queue: string; meta: string; shared: string } {
    const rk = this.lockKey(key);
    return { queue: `${rk}${QUEUE_SUFFIX}`, meta: `${rk}:qm`, shared: `${rk}:h` };
  }

  /** The lock key whose queue `queueKey` is, or undefined if it is not one of this group's. */
  keyOfQueue(queueKey: string): string | undefined {
    if (!queueKey.endsWith(QUEUE_SUFFIX)) return undefined;
    return this.keyOf(queueKey.slice(0, -QUEUE_SUFFIX.length));
  }

  /**
   * A SCAN pattern matching this group's lock keys and queues (`<prefix>{*`), narrowed to keys
   * containing `search` when given (glob characters in both are escaped).
   */
  scanPattern(search = ''): string {
    const narrow = search === '' ? '' : `*${globEscape(search)}`;
    return `${globEscape(this.prefix)}{${narrow}*`;
  }

  /** The lock board's names of a client group (see the file's header). */
  boardKeys(group: string): {
    instances: string;
    events: string;
    busy: string;
    watched: string;
    instance(id: string): string;
  } {
    const base = `${this.prefix}board:{${group}}`;
    return {
      instances: `${base}:instances`,
      events: `${base}:events`,
      busy: `${base}:busy`,
      watched: `${base}:watched`,
      instance: (id) => `${base}:i:${id}`,
    };
  }

  /** The release channel of a key. */
  releaseChannel(key: string): string {
    return this.lockKey(key) + RELEASE_CHANNEL_SUFFIX;
  }

  /** The grant channel of a process whose tokens start with `tokenPrefix` + separator. */
  static grantChannel(tokenPrefix: string): string {
    return GRANT_CHANNEL_PREFIX + tokenPrefix;
  }

  /** Decodes a message of the grant channel; undefined for anything else. */
  parseGrant(message: string): Grant | undefined {
    const parts = message.split(' ');
    if (parts[0] !== GRANT_WORD || parts.length < 5) return undefined;
    const key = this.keyOf(parts.slice(4).join(' '));
    if (key === undefined) return undefined;
    // An older release's `<spare>:<server ms>` reads as no spare fences: fewer local handoffs
    // without a round trip, nothing worse.
    return { key, token: parts[1], fence: Number(parts[2]), spare: Number(parts[3]) || 0 };
  }

  /** The key of a writer notice (`w <lock key>`); undefined for anything else. */
  parseWriterNotice(message: string): string | undefined {
    if (!message.startsWith(WRITER_WORD + ' ')) return undefined;
    return this.keyOf(message.slice(WRITER_WORD.length + 1));
  }

  /** The script keys of one lock key. */
  keySet(key: string): KeySet {
    let set = this.keySets.get(key);
    if (!set) {
      if (this.keySets.size >= KEY_SET_CACHE) this.keySets.clear();
      const rk = this.lockKey(key);
      const all = [rk, `${rk}:fence`, `${rk}:wait`, `${rk}:q`, `${rk}:qm`, `${rk}:h`];
      set = { all, take: [rk, all[1]] };
      this.keySets.set(key, set);
    }
    return set;
  }

  /** The full script keys of several lock keys, `KEYS_PER_LOCK` each. */
  allKeys(keys: readonly string[]): string[] {
    if (keys.length === 1) return this.keySet(keys[0]).all;
    const out: string[] = [];
    for (const k of keys) out.push(...this.keySet(k).all);
    return out;
  }

  /**
   * Key groups that can go in one script: every key at once, except on Redis Cluster where keys
   * of different slots go one by one (in sorted order, so never a deadlock).
   */
  units(keys: readonly string[]): string[][] {
    if (!this.clustered || keys.length === 1) return [this.allKeys(keys)];
    return keys.map((k) => this.keySet(k).all);
  }

  /**
   * The lock keys alone, when they can go in one script (as `units` would group them), else
   * undefined. Builds no key set: renewals of many distinct keys leave the cache alone.
   */
  lockKeysInOneUnit(keys: readonly string[]): string[] | undefined {
    if (this.clustered && keys.length > 1) return undefined;
    return keys.map((k) => this.lockKey(k));
  }
}

/** `text` with Redis glob characters escaped, for SCAN MATCH. */
function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}
