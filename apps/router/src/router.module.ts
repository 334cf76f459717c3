import { type DynamicModule, Module } from '@nestjs/common';
import type { Logger } from 'pino';
import { PlatformModule } from '@tessera/platform';
import { HelloController } from './hello.controller.js';
import { RouterRegistrationService } from './router-registration.service.js';
import type { RouterSettings } from './router.settings.js';

/** A router's composition root. Routers are stateless: no database of their own. */
@Module({})
export class RouterModule {
  static forRoot(settings: RouterSettings, logger: Logger): DynamicModule {
    return {
      module: RouterModule,
      imports: [PlatformModule.forRoot(settings, logger)],
      controllers: [HelloController],
      providers: [RouterRegistrationService],
    };
  }
}
