export * from './redlock-module-options.interface';
export * from './locked-options.interface';
export * from './lock-handle.interface';
export * from './redlock-options-factory.interface';
export * from './redlock.interface';
export * from '../core/lock-backend-definition';
