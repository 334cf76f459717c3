import { CORE } from '@tessera/core'; console.log('tool', CORE);
