import { CORE } from '@tessera/core';
console.log('core', CORE);
