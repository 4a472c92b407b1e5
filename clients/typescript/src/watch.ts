/** Server streams as async iterators that end when an `AbortSignal` aborts. */
import type { ClientReadableStream } from "@grpc/grpc-js";
import { translate } from "./connection.js";

/**
 * Yields `convert` of each message of the stream `open` starts. Aborting `signal` cancels the
 * call and ends the iteration normally; so does leaving a `for await` loop early. Any other end
 * of the call before the server closes it is thrown, as a `GrpcServiceError` naming `call`.
 */
export async function* watch<Message, Item>(
  open: () => ClientReadableStream<Message>,
  signal: AbortSignal | undefined,
  call: string,
  convert: (message: Message) => Item,
): AsyncGenerator<Item, void, undefined> {
  if (signal?.aborted) {
    return;
  }
  const stream = open();
  const cancel = (): void => {
    stream.cancel();
  };
  signal?.addEventListener("abort", cancel, { once: true });
  try {
    for await (const message of stream as AsyncIterable<Message>) {
      yield convert(message);
    }
  } catch (e) {
    if (signal?.aborted) {
      return;
    }
    throw translate(e, call);
  } finally {
    signal?.removeEventListener("abort", cancel);
    stream.cancel();
  }
}
