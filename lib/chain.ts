/** Something that can sit in one `Chain` at a time: the links live in the item itself. */
export interface Linked<T> {
  prev?: T;
  next?: T;
}

/**
 * A doubly linked list through its items, oldest first. For sets churned on hot paths (a round
 * trip, a hold, a sleeping watchdog): adding and removing allocate nothing, where a `Set` churned
 * at every call made each young-generation GC several times slower.
 * @internal
 */
export class Chain<T extends Linked<T>> {
  first?: T;
  last?: T;

  push(item: T): void {
    item.prev = this.last;
    item.next = undefined;
    if (this.last) this.last.next = item;
    else this.first = item;
    this.last = item;
  }

  /** Puts `item` first. */
  unshift(item: T): void {
    item.prev = undefined;
    item.next = this.first;
    if (this.first) this.first.prev = item;
    else this.last = item;
    this.first = item;
  }

  /** Takes `item` out; false if it was not in this chain. */
  remove(item: T): boolean {
    if (item.prev) item.prev.next = item.next;
    else if (this.first === item) this.first = item.next;
    else return false;
    if (item.next) item.next.prev = item.prev;
    else this.last = item.prev;
    item.prev = item.next = undefined;
    return true;
  }
}
