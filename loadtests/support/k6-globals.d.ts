// k6's global console (https://grafana.com/docs/k6/latest/javascript-api/#console), which
// @types/k6 does not declare. The tsconfig leaves out the DOM and Node libraries on purpose: the
// scripts may use only what k6 provides.
declare global {
  const console: {
    log(...values: unknown[]): void;
    info(...values: unknown[]): void;
    warn(...values: unknown[]): void;
    error(...values: unknown[]): void;
    debug(...values: unknown[]): void;
  };
}
export {};
