import { type Client, createClient } from 'node-zookeeper-client';

/**
 * A raw node-zookeeper-client session for the benches' floors and breakdowns (no lock recipe):
 * resolves once connected.
 */
export async function connectZooKeeper(connectString: string): Promise<Client> {
  const client = createClient(connectString, { sessionTimeout: 10_000 });
  await new Promise<void>((resolve) => {
    client.once('connected', () => resolve());
    client.connect();
  });
  return client;
}

/** A node-zookeeper-client call with its callback last, as a promise. */
export function zkCall<T = void>(
  run: (done: (error: unknown, value?: T) => void) => void,
): Promise<T> {
  return new Promise<T>((resolve, reject) =>
    run((error, value) => (error ? reject(error) : resolve(value as T))),
  );
}
