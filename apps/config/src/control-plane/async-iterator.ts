import type { Observable } from 'rxjs';

/**
 * An observable as the AsyncIterator a GraphQL subscription returns. Values queue while the
 * client is slow (the bus delivers in order; nothing is dropped); `return()` (the client
 * unsubscribed or disconnected) unsubscribes from the source.
 */
export function toAsyncIterator<T>(source: Observable<T>): AsyncIterableIterator<T> {
  const queue: T[] = [];
  const waiting: Array<(result: IteratorResult<T>) => void> = [];
  let failure: unknown;
  let done = false;
  const finish = () => {
    done = true;
    for (const resolve of waiting.splice(0)) resolve({ value: undefined, done: true });
  };
  const subscription = source.subscribe({
    next: (value) => {
      const resolve = waiting.shift();
      if (resolve) resolve({ value, done: false });
      else queue.push(value);
    },
    error: (error: unknown) => {
      failure = error;
      finish();
    },
    complete: finish,
  });
  const iterator: AsyncIterableIterator<T> = {
    next: () => {
      if (queue.length > 0) return Promise.resolve({ value: queue.shift() as T, done: false });
      if (failure !== undefined) return Promise.reject(failure);
      if (done) return Promise.resolve({ value: undefined, done: true });
      return new Promise((resolve) => waiting.push(resolve));
    },
    return: () => {
      subscription.unsubscribe();
      queue.length = 0;
      finish();
      return Promise.resolve({ value: undefined, done: true });
    },
    [Symbol.asyncIterator]: () => iterator,
  };
  return iterator;
}
