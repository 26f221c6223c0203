import { type DynamicModule, Global, Module } from '@nestjs/common';
import { SAMPLE_CONFIG, type SampleConfig } from './sample.config';

/** Makes the validated `SampleConfig` injectable everywhere (`@Inject(SAMPLE_CONFIG)`). */
@Global()
@Module({})
export class SampleConfigModule {
  static forRoot(config: SampleConfig): DynamicModule {
    return {
      module: SampleConfigModule,
      providers: [{ provide: SAMPLE_CONFIG, useValue: config }],
      exports: [SAMPLE_CONFIG],
    };
  }
}
