export { RedlockTestingModule } from './redlock-testing.module';
export type { RedlockTestingModuleOptions } from './redlock-testing.options';
export {
  RedlockTestingController,
  type BusyControlOptions,
  type DownControlOptions,
  type TestingControlTarget,
} from './redlock-testing.controller';
