import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { RedlockModuleExtras, RedlockModuleOptions } from '../interfaces';

/** @internal */
export const {
  ConfigurableModuleClass,
  MODULE_OPTIONS_TOKEN: REDLOCK_MODULE_OPTIONS,
  OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<RedlockModuleOptions>({ moduleName: 'Redlock' })
  .setClassMethodName('forRoot')
  .setFactoryMethodName('createRedlockOptions')
  .setExtras<RedlockModuleExtras>({ isGlobal: true }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
  }))
  .build();
