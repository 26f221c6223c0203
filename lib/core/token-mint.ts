/**
 * The tokens of one backend's leases, minted one way: `<prefix>.<counter in base 36>`. The prefix
 * says whose they are: the group's name where a token never leaves this process (SQL, memory), a
 * random id of this process where the server keeps it beside other processes' (ZooKeeper's node
 * names). etcd mints none: a hold's token is the name of its own key in etcd.
 * @internal
 */
export class TokenMint {
  private minted = 0;

  constructor(private readonly prefix: string) {}

  next(): string {
    return `${this.prefix}.${(++this.minted).toString(36)}`;
  }
}
