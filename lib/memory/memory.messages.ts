/** The messages of `backend: 'memory'` (`memory/`). */

export const MEMORY_BACKEND_STARTED = (group: string) =>
  `Lock group "${group}" uses the memory backend: it locks within this process only, so ` +
  'instances of the app do not exclude each other. Use Redis or a database backend for several ' +
  'instances.';
