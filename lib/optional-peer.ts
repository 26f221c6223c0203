/**
 * Loads an optional peer dependency (`@opentelemetry/api`, `@nestjs/event-emitter`) only when
 * the application installed it: a plain `import` would make every user install it. Anything but
 * "not installed" (a broken install) is thrown, so it is not mistaken for an absent package.
 * @internal
 */
export function loadOptionalPeer<T>(name: string): T | undefined {
  try {
    // A static import would load the package for everyone: required lazily, on purpose.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(name) as T;
  } catch (err) {
    const code = (err as { code?: unknown } | null)?.code;
    if (code === 'MODULE_NOT_FOUND' && String((err as Error).message).includes(`'${name}'`)) {
      return undefined;
    }
    throw err;
  }
}
