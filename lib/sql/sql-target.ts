import type { SqlTarget } from './sql-errors';

/** Connection settings as the drivers take them (the fields messages name). */
export interface SqlConnectionFields {
  readonly host?: unknown;
  readonly port?: unknown;
  readonly user?: unknown;
  readonly database?: unknown;
  readonly socketPath?: unknown;
  /** A `postgres://` or `mysql://` URL (`connectionString`, `uri`). */
  readonly url?: unknown;
}

/**
 * Where a backend connects, for messages and health: the URL's parts first, then the fields,
 * then the driver's defaults. Never the password.
 * @internal
 */
export function sqlTarget(
  label: string,
  fields: SqlConnectionFields,
  defaults: { host: string; port: number; user: string; database: string },
): SqlTarget {
  let url: URL | undefined;
  try {
    url = typeof fields.url === 'string' ? new URL(fields.url) : undefined;
  } catch {
    url = undefined;
  }
  const text = (value: unknown): string | undefined =>
    typeof value === 'string' && value !== ''
      ? value
      : typeof value === 'number'
        ? String(value)
        : undefined;
  const host = text(url?.hostname) ?? text(fields.host) ?? defaults.host;
  const port = text(url?.port) ?? text(fields.port) ?? String(defaults.port);
  const socket = text(fields.socketPath);
  return {
    label,
    node: socket ?? (host.startsWith('/') ? host : `${host}:${port}`),
    user: text(url && decodeURIComponent(url.username)) ?? text(fields.user) ?? defaults.user,
    database:
      text(url && decodeURIComponent(url.pathname.replace(/^\//, ''))) ??
      text(fields.database) ??
      defaults.database,
  };
}
