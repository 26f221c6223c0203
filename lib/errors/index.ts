export * from './lock.error';
export * from './lock-not-acquired.error';
export * from './lock-backend.error';
export * from './lock-lost.error';
export * from './lock-key.error';
export * from './lock-config.error';
export * from './segment-exhausted.error';
export * from './all-segments-exhausted.error';
