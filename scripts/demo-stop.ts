import { say } from './demo-progress';

/**
 * On SIGINT or SIGTERM, stops what a demo started and exits with 130, once: Ctrl-C reaches the
 * demo twice (from the terminal and from the launcher), and a second signal must not end the
 * process (Node's default) before `stopAll` has stopped every server and instance.
 * `interrupted` runs at the first signal. Returns the function that removes the handlers.
 */
export function stopOnSignals(stopAll: () => Promise<void>, interrupted?: () => void): () => void {
  let seen = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (seen) return;
    seen = true;
    interrupted?.();
    process.stdout.write('\n');
    say(`${signal}: stopping everything the demo started...`);
    void stopAll().finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
}
