import * as fs from 'node:fs';
import { type BrowserContext, chromium } from 'playwright-core';
import { tempDir } from './sample-app';

/** Debian's chromium: the browser tests drive it with playwright-core and never download one. */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * A headless chromium with a fresh profile that answers the board's Basic challenge with
 * `credentials`. `close()` ends it and removes the profile.
 */
export async function boardBrowser(credentials: {
  username: string;
  password: string;
}): Promise<{ context: BrowserContext; close: () => Promise<void> }> {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(
      `${CHROMIUM} is missing: apt-get install chromium (the test never downloads a browser).`,
    );
  }
  const profile = tempDir('board-chromium');
  // A fresh profile per run (--user-data-dir), as playwright-core takes it.
  const context = await chromium.launchPersistentContext(profile.path, {
    executablePath: CHROMIUM,
    httpCredentials: credentials,
    // axe-core is injected as an inline script, which the board's CSP forbids.
    bypassCSP: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return {
    context,
    close: async () => {
      await context.close();
      profile.remove();
    },
  };
}
