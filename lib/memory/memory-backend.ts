import type { LockBackendDefinition } from '../core/lock-backend-definition';
import { MEMORY_BACKEND_STARTED } from './memory.messages';
import { InMemoryBackend } from './in-memory-backend';

/**
 * `backend: 'memory'`: the locks of a group in this process's memory (the engine of
 * `nest-locked/testing`), for a single instance or local development. Chosen explicitly only,
 * never a fallback when a server is down; its startup log line says it locks this process only.
 * @internal
 */
export function memoryBackend(): LockBackendDefinition {
  return {
    kind: 'memory',
    supports: { read: true, permits: true },
    create: ({ group, driftFactor, logger }) => {
      logger.log(MEMORY_BACKEND_STARTED(group));
      return new InMemoryBackend(group, driftFactor);
    },
  };
}
