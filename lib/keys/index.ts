export { compileKeySource, type KeyRenderer, type KeySource } from './key-source';
export { assertRawKey, rawKeys } from './raw-key';
