import type { NestInterceptor, Type } from '@nestjs/common';
import { INTERCEPTORS_METADATA } from '@nestjs/common/constants';
import type { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';

/**
 * What marks a handler Nest routes outside HTTP: a gateway's `@SubscribeMessage` and a
 * controller's `@MessagePattern` / `@EventPattern` (the values of `MESSAGE_MAPPING_METADATA` of
 * `@nestjs/websockets` and `PATTERN_METADATA` of `@nestjs/microservices`, optional peers that are
 * not loaded for this).
 */
const MESSAGE_HANDLER_KEYS = ['websockets:message_mapping', 'microservices:pattern'] as const;

/**
 * Puts `interceptor` on every WebSocket and microservice message handler of the application, as
 * `@UseInterceptors` on the method would: Nest's global interceptors (`APP_INTERCEPTOR`) reach
 * neither a gateway nor the microservice of a hybrid app (`connectMicroservice` without
 * `inheritAppConfig`). Runs while providers are built, before Nest creates those handlers'
 * contexts (`connectMicroservice` does at once, gateways at `init()`).
 *
 * The metadata belongs to the class, shared by every application of the process: an interceptor
 * of the same class put there by an earlier application is replaced, and with `interceptor`
 * undefined (`interceptor: false`) only removed.
 * @internal
 */
export function bindToMessageHandlers(
  interceptor: NestInterceptor | undefined,
  discovery: DiscoveryService,
  scanner: MetadataScanner,
  kind: Type<NestInterceptor>,
): void {
  const seen = new Set<object>();
  for (const wrapper of [...discovery.getControllers(), ...discovery.getProviders()]) {
    const proto = prototypeOf(wrapper);
    if (!proto || seen.has(proto)) continue;
    seen.add(proto);
    for (const name of scanner.getAllMethodNames(proto)) {
      const method = (proto as Record<string, unknown>)[name];
      if (typeof method !== 'function') continue;
      if (!MESSAGE_HANDLER_KEYS.some((key) => Reflect.getMetadata(key, method) !== undefined)) {
        continue;
      }
      const current = (Reflect.getMetadata(INTERCEPTORS_METADATA, method) ?? []) as unknown[];
      const others = current.filter((i) => !(i instanceof kind));
      // First: outside the method's own interceptors, which then see the error as mapped.
      const next = interceptor ? [interceptor, ...others] : others;
      Reflect.defineMetadata(INTERCEPTORS_METADATA, next, method);
    }
  }
}

/** The prototype of a class provider or controller (none for values and factories). */
function prototypeOf(wrapper: InstanceWrapper): object | undefined {
  if (wrapper.inject || typeof wrapper.metatype !== 'function') return undefined;
  return (wrapper.metatype as Type).prototype as object | undefined;
}
