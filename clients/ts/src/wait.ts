/** A promise bounded in time: rejects with `message` after `ms` (and calls `onTimeout` to drop the waiter). */
export function withTimeout<T>(promise: Promise<T>, ms: number, message: string, onTimeout: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => { onTimeout(); reject(new Error(message)); }, ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
