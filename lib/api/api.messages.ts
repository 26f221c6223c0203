import { describeKind, quotedList } from '../redlock.messages';

/**
 * The messages of `api/`: `@Locked` (its compile-time messages too), `LockService`,
 * `LockInterceptor`, lock events and telemetry.
 */

/**
 * What `LockInterceptor` tells a client of the application (HTTP, RPC, WebSocket, GraphQL): what
 * happened in the terms of its request. Never a lock key nor a Redis error: those stay on the
 * error object and in the logs.
 */
export const CLIENT_MESSAGES = {
  busy: 'The resource is busy; retry later.',
  exhausted: 'The resource cannot serve this request now.',
  unavailable: 'The service is temporarily unavailable.',
  deadlock: 'The request conflicted with another one; retry it.',
  badRequest: (placeholder: string | undefined) =>
    placeholder === undefined
      ? 'Invalid request: its values do not identify a resource.'
      : `Invalid request: no valid value for "${placeholder}".`,
} as const;

/** The WARN `LockInterceptor` logs when a lock error becomes a 5xx (Redis failed): the details. */
export const SERVER_ERROR_ANSWERED = (where: string, status: number, error: Error) =>
  `${where} answered ${status}: ${error.message}`;

export const LOCKED_NOT_A_METHOD = (where: string) =>
  `@Locked can only decorate a method; ${where} is not one. Put it on a method of a class Nest ` +
  `instantiates.`;

export const LOCKED_STATIC = (where: string) =>
  `@Locked cannot decorate the static method ${where}: it needs the instance Nest built. Make ` +
  `it an instance method of a provider or controller.`;

export const LOCKED_SEGMENTS_KEYS = (where: string) =>
  `@Locked on ${where}: "segments" needs exactly one template naming the split resource ` +
  `(e.g. 'stock:{sku}'), not several keys or a function.`;

export const NO_LOCK_SERVICE = (where: string) =>
  `@Locked on ${where} found no LockService: the instance was not created by Nest, or ` +
  `RedlockModule.forRoot() is not imported (it is global by default; with isGlobal: false import it ` +
  `into this module). In a unit test, import RedlockTestingModule.forRoot() from ` +
  `'nest-locked/testing' (locks in memory, no Redis).`;

export const READ_TO_WRITE = (key: string) =>
  `Lock "${key}": this call holds it for reading and asked for the write lock of the same key; ` +
  `upgrading a read hold would deadlock with other readers. Take the write lock first (a ` +
  `write holder may enter read holds of its key), or release the read hold.`;

export const ACQUIRE_TAKES_NO_SEGMENTS =
  'LockService.acquire does not take "segments"; use using() or @Locked for segmented locks.';

export const USING_NEEDS_FUNCTION = (where: string, value: unknown) =>
  `${where}: its second argument (fn) must be the function to run under the lock; got ` +
  `${describeKind(value)}. Pass it as in locks.using('product:42', async (lock) => { ... }).`;

export const TELEMETRY_NEEDS_OTEL =
  'The nest-locked option telemetry: true needs @opentelemetry/api: install it ' +
  "(npm install @opentelemetry/api), or leave telemetry at 'auto' (records when it is installed " +
  'and an OpenTelemetry SDK is registered) or set it to false.';

export const LOCK_EVENT_LISTENER_FAILED = (event: string, error: unknown) =>
  `A listener of the lock event "${event}" threw; the lock call goes on: ${
    error instanceof Error ? error.message : String(error)
  }`;

export const UNKNOWN_LOCK_EVENT = (event: string, known: readonly string[]) =>
  `LockService.on("${event}"): no such lock event; the events are ${quotedList(known)}.`;

// Compile-time messages of @Locked (types; TypeScript shows them in its errors).

export type TYPE_NOT_ASYNC =
  '@Locked needs a method that returns a Promise or an Observable: declare it async (it returns a Promise once decorated)';
export type TYPE_SKIP_RESOLVES_UNDEFINED =
  "@Locked with onBusy: 'skip' resolves undefined when the lock is busy: declare the method's result as Promise<T | undefined>";
export type TYPE_KEY_FUNCTION_PARAMETERS =
  "@Locked key function: its parameters do not match the method's";
export type TYPE_UNKNOWN_OPTION<Key extends PropertyKey> =
  `@Locked: unknown option "${Key & string}" (see LockedOptions)`;

export type TYPE_KEY_FUNCTION_THIS =
  "@Locked key function: its 'this' parameter is not the class of the decorated method";

/** `who`: `@Locked on Class.method`, `LockService.using`... */
export const SHARED_UNSUPPORTED = (
  who: string,
  group: string,
  kind: string,
  shared: 'read' | 'permits',
) =>
  `${who} asks for ${shared === 'read' ? "mode: 'read'" : 'permits > 1'} in lock group ` +
  `"${group}", whose ${kind} backend has no ${shared === 'read' ? 'shared (read) lock' : 'permits'}. ` +
  'Use the exclusive lock there, or a group on Redis, PostgreSQL, etcd or ZooKeeper.';
