import { Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { LockConfigError } from '../errors';
import { LockGroupRegistry } from './lock-group.registry';
import { getLockedMethod } from '../api/locked.decorator';
import { DEFAULT_CLIENT } from '../redlock.constants';
import { LOCKED_UNKNOWN_CLIENT } from './module.messages';
import { refuseUnsupportedShare } from '../api/shared-hold-support';

/**
 * Checks every `@Locked` method at startup against the module's options (a `client` group that
 * does not exist, or a read lock or permits on a backend without them, fails startup, not the
 * first call), and tells each group the leases its methods declare (on Redis, a quorum's
 * restarted nodes wait out the longest lease in use, even one no call asked for yet). It
 * validates; it never patches methods.
 * @internal
 */
@Injectable()
export class LockExplorer implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly registry: LockGroupRegistry,
  ) {}

  onModuleInit(): void {
    const wrappers = [...this.discovery.getProviders(), ...this.discovery.getControllers()];
    for (const wrapper of wrappers) {
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      const proto = instance && (Object.getPrototypeOf(instance) as object | null);
      if (!proto) continue;
      for (const name of this.scanner.getAllMethodNames(proto)) {
        const method = getLockedMethod((proto as Record<string, unknown>)[name]);
        if (!method) continue;
        const { client = DEFAULT_CLIENT, ttl, minHold } = method.options;
        if (!this.registry.has(client)) {
          throw new LockConfigError(
            LOCKED_UNKNOWN_CLIENT(method.where, client, this.registry.names),
            `@Locked on ${method.where}.client`,
          );
        }
        const who = `@Locked on ${method.where}`;
        refuseUnsupportedShare(
          who,
          client,
          this.registry.definition(client),
          method.options,
          (o) => `${who}.${o}`,
        );
        for (const lease of [ttl, minHold]) {
          if (lease !== undefined) this.registry.leaseInUse(client, lease);
        }
      }
    }
  }
}
