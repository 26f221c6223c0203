import { LockError } from './lock.error';

/**
 * Bad module or decorator options. Thrown at startup (module options) or at decoration time
 * (`@Locked` options), naming the field and the bad value.
 *
 * @publicApi
 */
export class LockConfigError extends LockError {
  constructor(
    message: string,
    /** The option at fault, e.g. `ttl` or `clients.orders`. */
    readonly field: string,
  ) {
    super(message, []);
  }
}
