/**
 * `work`, or a rejection after `ms` saying it did not connect in time (the work goes on in the
 * background): how startup bounds a connect.
 * @internal
 */
export async function within(work: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  work.catch(() => undefined);
  try {
    await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`not connected within ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
