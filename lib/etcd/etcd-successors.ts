/**
 * Who waits for the deletion of which key, in this process: a holder's release wakes the waiters
 * right behind it without a watch event.
 * @internal
 */
export class Successors {
  private readonly byKey = new Map<string, ((handedOver: boolean) => void)[]>();

  add(key: string, wake: (handedOver: boolean) => void): void {
    const list = this.byKey.get(key);
    if (list) list.push(wake);
    else this.byKey.set(key, [wake]);
  }

  remove(key: string, wake: (handedOver: boolean) => void): void {
    const list = this.byKey.get(key);
    const at = list ? list.indexOf(wake) : -1;
    if (at < 0) return;
    list!.splice(at, 1);
    if (list!.length === 0) this.byKey.delete(key);
  }

  /** Wakes every waiter of `key`; whether there was one. */
  wake(key: string, handedOver: boolean): boolean {
    const list = this.byKey.get(key);
    if (!list) return false;
    for (const wake of [...list]) wake(handedOver);
    return true;
  }
}
