import * as net from 'node:net';

/**
 * The server side of one client connection a loopback test proxy accepted: a connection to
 * `host:port`, both tracked in `sockets` and closed together (either side closing or failing
 * ends both). The proxy forwards between them as it wants.
 */
export function connectUpstream(
  client: net.Socket,
  port: number,
  host: string,
  sockets: Set<net.Socket>,
): net.Socket {
  const upstream = net.connect(port, host);
  sockets.add(client).add(upstream);
  const end = () => {
    client.destroy();
    upstream.destroy();
    sockets.delete(client);
    sockets.delete(upstream);
  };
  client.on('error', end).on('close', end);
  upstream.on('error', end).on('close', end);
  return upstream;
}
