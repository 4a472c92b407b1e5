/**
 * The `AppendEvents` streams `GrpcSessionService.appendEvent` sends over: one per session being
 * appended to, opened by its first append and ended once it has been idle for a while, or by
 * `close()`. On a stream an append costs the client no HTTP/2 stream, metadata or status of its
 * own, which is most of what a unary `AppendEvent` costs it; streams of different sessions still
 * run side by side on the server.
 *
 * The server answers one stream's requests one at a time and in order, so each response answers
 * the oldest unanswered append. Whatever could break that order ends the stream: an append whose
 * deadline passes fails with DEADLINE_EXCEEDED and its stream is cancelled (its late response
 * would otherwise answer the next append). The appends a stream leaves unanswered, whether it
 * broke (a server restart) or was cancelled, are sent once more as unary `AppendEvent` calls,
 * with their own deadline and the channel's retry policy: the server answers an event it already
 * holds (same id and payload) with the stored one, so nothing is stored twice. A server without
 * `AppendEvents` (UNIMPLEMENTED) gets unary calls from then on.
 */
import { status, type ClientDuplexStream } from "@grpc/grpc-js";
import { type CallSettings, invoke, statusError } from "./connection.js";
import type { AppendEventRequest, AppendEventResponse, SessionServiceClient } from "./gen/adk/session/v1/session.js";

// Streams open at once. Each holds one of the connection's HTTP/2 streams, which servers and
// proxies limit (often to 100 or 128); past this many an idle stream is ended to make room, or
// the append goes as a unary call.
const MAX_STREAMS = 64;

/** One append waiting for its response. */
interface Pending {
  request: AppendEventRequest;
  /** Epoch milliseconds, or undefined without a deadline. */
  deadline: number | undefined;
  resolve: (reply: AppendEventResponse) => void;
  reject: (error: Error) => void;
  timer?: NodeJS.Timeout;
}

/** The append streams of one service, by session. */
export class AppendStreams {
  private readonly streams = new Map<string, AppendStream>();
  /** The server answered a stream UNIMPLEMENTED: appends are unary calls from then on. */
  private unsupported = false;
  private closed = false;

  constructor(
    private readonly client: SessionServiceClient,
    private readonly settings: CallSettings,
    private readonly idleMs: number,
  ) {}

  /**
   * Appends one event. Resolves with the server's response; rejects with a grpc-js call error
   * (its `code` and `details`) exactly as a unary `AppendEvent` call does.
   */
  append(request: AppendEventRequest): Promise<AppendEventResponse> {
    const deadline = this.settings.deadline();
    const stream = this.streamOf(request);
    if (stream === undefined) {
      return this.unary(request, deadline);
    }
    return new Promise((resolve, reject) => {
      stream.send({ request, deadline, resolve, reject });
    });
  }

  /** Ends every stream after the server has answered what it was sent. */
  close(): void {
    this.closed = true;
    for (const stream of [...this.streams.values()]) {
      stream.end();
    }
  }

  /** The open stream of the request's session, opened if need be; undefined to go unary. */
  private streamOf(request: AppendEventRequest): AppendStream | undefined {
    if (this.unsupported || this.closed) {
      return undefined;
    }
    // Identifiers hold no control characters: a NUL joins them unambiguously.
    const key = `${request.appName}\u0000${request.userId}\u0000${request.sessionId}`;
    let stream = this.streams.get(key);
    if (stream === undefined) {
      if (this.streams.size >= MAX_STREAMS) {
        const idle = [...this.streams.values()].find((open) => open.idle);
        if (idle === undefined) {
          return undefined;
        }
        idle.end();
      }
      stream = new AppendStream(key, this.client.appendEvents(this.settings.stream()), this, this.idleMs);
      this.streams.set(key, stream);
    }
    return stream;
  }

  /** Stops sending to `stream` (it is ending). */
  forget(stream: AppendStream): void {
    if (this.streams.get(stream.key) === stream) {
      this.streams.delete(stream.key);
    }
  }

  /** Sends again, once and as unary calls, the appends an ended stream left unanswered. */
  resend(unanswered: Pending[], unimplemented: boolean): void {
    if (unimplemented) {
      this.unsupported = true;
    }
    for (const append of unanswered) {
      this.unary(append.request, append.deadline).then(append.resolve, append.reject);
    }
  }

  private unary(request: AppendEventRequest, deadline: number | undefined): Promise<AppendEventResponse> {
    return invoke(this.client.appendEvent.bind(this.client), request, this.settings, deadline);
  }
}

/** One session's `AppendEvents` call and the appends it has not answered yet, oldest first. */
class AppendStream {
  private readonly unanswered: Pending[] = [];
  private idleTimer: NodeJS.Timeout | undefined;
  /** Whether the server answered anything (a stream it does not implement never is). */
  private answered = false;
  /** Cancelled or ended: a response still arriving answers nothing. */
  private done = false;

  constructor(
    readonly key: string,
    private readonly call: ClientDuplexStream<AppendEventRequest, AppendEventResponse>,
    private readonly owner: AppendStreams,
    private readonly idleMs: number,
  ) {
    call.on("data", (reply: AppendEventResponse) => {
      this.answer(reply);
    });
    // Every end comes as a status, failed or not; the error event repeats a failed one.
    call.on("error", () => undefined);
    call.on("status", ({ code }: { code: status }) => {
      this.owner.forget(this);
      // Responses the stream still buffers are delivered before its end: wait for them.
      if (call.readableLength === 0) this.finish(code);
      else
        call.once("end", () => {
          this.finish(code);
        });
    });
  }

  /** Whether every append sent has been answered. */
  get idle(): boolean {
    return this.unanswered.length === 0;
  }

  send(append: Pending): void {
    clearTimeout(this.idleTimer);
    this.unanswered.push(append);
    if (append.deadline !== undefined) {
      append.timer = setTimeout(() => {
        this.expire(append);
      }, append.deadline - Date.now());
    }
    this.call.write(append.request);
  }

  /** Half-closes the stream: the server answers what it was sent, then ends it. */
  end(): void {
    clearTimeout(this.idleTimer);
    this.owner.forget(this);
    this.call.end();
  }

  private answer(reply: AppendEventResponse): void {
    if (this.done) {
      return;
    }
    const append = this.unanswered.shift();
    if (append === undefined) {
      // A response to nothing sent: the order cannot be trusted any more.
      this.cancel();
      return;
    }
    this.answered = true;
    clearTimeout(append.timer);
    if (reply.code === 0) {
      append.resolve(reply);
    } else {
      append.reject(statusError(reply.code, reply.message));
    }
    if (this.unanswered.length === 0) {
      this.idleTimer = setTimeout(() => {
        this.end();
      }, this.idleMs).unref();
    }
  }

  /** Fails an append whose deadline passed, and cancels the stream it would shift out of order. */
  private expire(append: Pending): void {
    const at = this.unanswered.indexOf(append);
    if (at < 0) {
      return;
    }
    this.unanswered.splice(at, 1);
    append.reject(statusError(status.DEADLINE_EXCEEDED, "Deadline exceeded"));
    this.cancel();
  }

  /** Ends the stream at once; its unanswered appends are sent again when its status comes. */
  private cancel(): void {
    this.done = true;
    this.owner.forget(this);
    this.call.cancel();
  }

  private finish(code: status): void {
    this.done = true;
    clearTimeout(this.idleTimer);
    this.owner.forget(this);
    const unanswered = this.unanswered.splice(0);
    for (const append of unanswered) {
      clearTimeout(append.timer);
    }
    this.owner.resend(unanswered, code === status.UNIMPLEMENTED && !this.answered);
  }
}
