import { Observable } from 'rxjs';
import { LockContext, type LockScope } from './lock-context';

/**
 * A locked method's Observable, holding the lock until it completes, errors or is unsubscribed:
 * it runs in the lock's context, and `end` (the call leaves its holds) comes before its end is
 * passed on. `end` runs once, whichever comes first.
 * @internal
 */
export function heldObservable(
  source: Observable<unknown>,
  scope: LockScope,
  end: () => Promise<void>,
): Observable<unknown> {
  let ended: Promise<void> | undefined;
  const finish = () => (ended ??= end());
  return new Observable((subscriber) => {
    const inner = LockContext.run(scope, () =>
      source.subscribe({
        next: (v) => subscriber.next(v),
        error: (e: unknown) => void finish().then(() => subscriber.error(e)),
        complete: () => void finish().then(() => subscriber.complete()),
      }),
    );
    return () => {
      inner.unsubscribe();
      void finish();
    };
  });
}
