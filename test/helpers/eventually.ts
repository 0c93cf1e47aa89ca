/**
 * Waits, a bounded time, for something the kernel or the event loop delivers asynchronously
 * (a peer's accept count catching up with a client that already connected).
 */
export async function eventually<T>(read: () => T, accept: (value: T) => boolean, ms = 2_000): Promise<T> {
  const until = Date.now() + ms;
  let value = read();
  while (!accept(value) && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 5));
    value = read();
  }
  return value;
}
