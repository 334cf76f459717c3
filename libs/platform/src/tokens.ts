/** Injection tokens for what the platform provides to every app. */
export const SETTINGS = Symbol('SETTINGS');
export const LOGGER = Symbol('LOGGER');
export const INTERNAL_AGENT = Symbol('INTERNAL_AGENT');
