import { type Sequence, type Step, type StepAnswer, type WorkloadOptions, graphqlBody, routerHeaders } from '../../loadtests/lib/index.ts';

export type RouterStep = Extract<Step, { kind: 'router' }>;

/** What a request that got no response answers, as k6/http has it. */
export const NO_ANSWER: StepAnswer = { status: 0, body: null };

/** GETs, or POSTs JSON when there is a body; answers the status and parsed body, or NO_ANSWER when no response came. */
async function requestJson(url: string, body: string | undefined, headers: Record<string, string> = {}): Promise<StepAnswer> {
  try {
    const response = await fetch(
      url,
      body === undefined
        ? { method: 'GET', headers }
        : { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body },
    );
    const text = await response.text();
    return { status: response.status, body: text === '' ? null : (JSON.parse(text) as unknown) };
  } catch {
    return NO_ANSWER;
  }
}

/** POSTs JSON; answers the status and parsed body, or NO_ANSWER when no response came. */
export function postJson(url: string, body: string, headers: Record<string, string> = {}): Promise<StepAnswer> {
  return requestJson(url, body, headers);
}

/** Sends a router step as built, to its router or the workload's. */
export function sendToRouter(options: WorkloadOptions, step: RouterStep): Promise<StepAnswer> {
  const url = `${step.routerUrl ?? options.routerUrl}${step.path}`;
  return requestJson(url, step.method === 'GET' ? undefined : JSON.stringify(step.body), routerHeaders(options));
}

/**
 * The Node driver of a loadtests/lib sequence: what loadtests/support/k6-driver.ts does with
 * k6/http, with fetch. Sleeps, sends GraphQL steps to the config server with the admin token, and
 * hands router steps to `router` (by default: sent as built), so a test can record, change, lose
 * or answer them.
 */
export async function runSequence<T>(
  options: WorkloadOptions,
  sequence: Sequence<T>,
  router: (step: RouterStep) => Promise<StepAnswer> = (step) => sendToRouter(options, step),
): Promise<T> {
  let next = sequence.next();
  while (!next.done) {
    const step = next.value;
    let answer: StepAnswer = NO_ANSWER;
    if (step.kind === 'sleep') await new Promise((resolve) => setTimeout(resolve, step.ms));
    else if (step.kind === 'graphql')
      answer = await postJson(`${options.configUrl}/graphql`, graphqlBody(step.request), { authorization: `Bearer ${options.adminToken}` });
    else answer = await router(step);
    next = sequence.next(answer);
  }
  return next.value;
}
