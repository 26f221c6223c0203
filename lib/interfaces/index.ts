export * from './redlock-module-options.interface';
export * from './locked-options.interface';
export * from './lock-handle.interface';
