/**
 * How both services reach their server: service URIs and the environment, channel credentials,
 * per-call deadlines and metadata, which calls are retried, and how a failed call is reported.
 */
import { readFileSync } from "node:fs";
import {
  credentials as grpcCredentials,
  Metadata,
  status,
  type CallOptions,
  type ChannelCredentials,
  type ChannelOptions,
  type ServiceError,
} from "@grpc/grpc-js";

/** Which server a service talks to: sessions or memory. */
export type ServiceKind = "session" | "memory";

/** How a service connects; every field may also come from a URI and the environment. */
export interface ConnectionOptions {
  /**
   * `grpc://host[:port]` (plaintext) or `grpcs://host[:port]` (TLS), with query parameters
   * `token_env=NAME`, `ca_file=PATH` and `timeout=SECONDS`. Give this or `target`.
   */
  uri?: string;
  /** A `host:port` address (plaintext unless `credentials` say otherwise). */
  target?: string;
  /** Channel credentials, e.g. `credentials.createSsl(ca)`; wins over the URI's. */
  credentials?: ChannelCredentials;
  /** A bearer token sent as `authorization: Bearer <token>` with every call. */
  token?: string;
  /** Seconds allowed per unary call and per append; watches have no deadline. */
  timeout?: number;
  /** Further grpc-js channel options. */
  channelOptions?: ChannelOptions;
  /** Environment to read `ADK_GRPC_*` settings from (default: `process.env`). */
  env?: NodeJS.ProcessEnv;
}

/** What a URI, the constructor and the environment say, resolved. */
export interface Endpoint {
  target: string;
  credentials: ChannelCredentials;
  token: string | undefined;
  timeoutMs: number | undefined;
}

export const DEFAULT_PORTS: Record<ServiceKind, number> = { session: 50051, memory: 50052 };

// The servers accept events of up to 16 MiB in requests of up to 17 MiB; the client sends and
// receives messages of the same size. GetSession and ListEvents replies are asked for at most
// READ_BUDGET_BYTES of events (one event past it at most).
export const MAX_MESSAGE_BYTES = (16 << 20) + (1 << 20);
export const READ_BUDGET_BYTES = 4 << 20;

/** A failed call: its gRPC status code and the server's message, naming the call. */
export class GrpcServiceError extends Error {
  override readonly name = "GrpcServiceError";
  constructor(
    readonly code: status,
    readonly details: string,
    call: string,
    options?: { cause?: unknown },
  ) {
    super(`${call} failed: ${status[code]}: ${details}`, options);
  }
}

/** Whether `error` is a grpc-js call error. */
export function isServiceError(error: unknown): error is ServiceError {
  return error instanceof Error && typeof (error as Partial<ServiceError>).code === "number" && "metadata" in error;
}

/** The error a caller sees for a failed call without a more specific meaning. */
export function translate(error: unknown, call: string): Error {
  if (isServiceError(error)) {
    return new GrpcServiceError(error.code, error.details, call, { cause: error });
  }
  return error instanceof Error ? error : new Error(String(error));
}

/** Resolves a service's endpoint from its options, a URI and the environment. */
export function resolveEndpoint(kind: ServiceKind, options: ConnectionOptions): Endpoint {
  const env = options.env ?? process.env;
  const setting = (name: string): string | undefined =>
    env[`ADK_GRPC_${kind.toUpperCase()}_${name}`] || env[`ADK_GRPC_${name}`] || undefined;
  let token = setting("TOKEN");
  let timeoutText = setting("TIMEOUT");
  let target: string;
  let credentials: ChannelCredentials;
  if (options.uri !== undefined) {
    if (options.target !== undefined) {
      throw new TypeError("give a target address or a uri, not both");
    }
    const parsed = parseUri(options.uri, kind, env);
    target = parsed.target;
    credentials = parsed.credentials;
    token = parsed.token ?? token;
    timeoutText = parsed.timeoutText ?? timeoutText;
  } else if (options.target !== undefined) {
    target = options.target;
    credentials = grpcCredentials.createInsecure();
  } else {
    throw new TypeError("give a target address or a uri");
  }
  return {
    target,
    credentials: options.credentials ?? credentials,
    token: options.token ?? token,
    timeoutMs:
      options.timeout !== undefined
        ? timeoutMs(String(options.timeout), "timeout")
        : timeoutText === undefined
          ? undefined
          : timeoutMs(timeoutText, options.uri ?? "timeout"),
  };
}

interface ParsedUri {
  target: string;
  credentials: ChannelCredentials;
  token: string | undefined;
  timeoutText: string | undefined;
}

function parseUri(uri: string, kind: ServiceKind, env: NodeJS.ProcessEnv): ParsedUri {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    throw new TypeError(`expected a grpc:// or grpcs:// URI, got ${JSON.stringify(uri)}`);
  }
  const scheme = url.protocol.slice(0, -1);
  if (scheme !== "grpc" && scheme !== "grpcs") {
    throw new TypeError(`expected a grpc:// or grpcs:// URI, got ${JSON.stringify(uri)}`);
  }
  if ((url.pathname !== "" && url.pathname !== "/") || url.hash !== "" || url.username !== "") {
    throw new TypeError(`a ${scheme}:// URI names host, port and query parameters only, got ${JSON.stringify(uri)}`);
  }
  if (url.hostname === "") {
    throw new TypeError(`${JSON.stringify(uri)} names no host`);
  }
  const target = `${url.hostname}:${url.port || DEFAULT_PORTS[kind]}`;
  let token: string | undefined;
  let timeoutText: string | undefined;
  let caFile =
    scheme === "grpcs"
      ? env[`ADK_GRPC_${kind.toUpperCase()}_CA_FILE`] || env["ADK_GRPC_CA_FILE"] || undefined
      : undefined;
  for (const [name, value] of url.searchParams) {
    if (name === "token_env") {
      token = env[value];
      if (!token) {
        throw new TypeError(`${uri}: token_env names $${value}, which is not set`);
      }
    } else if (name === "ca_file") {
      if (scheme !== "grpcs") {
        throw new TypeError(`${uri}: ca_file needs a grpcs:// URI`);
      }
      caFile = value;
    } else if (name === "timeout") {
      timeoutText = value;
    } else {
      throw new TypeError(
        `${uri}: unknown query parameter ${JSON.stringify(name)} (known: token_env, ca_file, timeout)`,
      );
    }
  }
  let credentials = grpcCredentials.createInsecure();
  if (scheme === "grpcs") {
    let root: Buffer | null = null;
    if (caFile !== undefined) {
      try {
        root = readFileSync(caFile);
      } catch (e) {
        throw new TypeError(`${uri}: cannot read ca_file ${caFile}: ${(e as Error).message}`, { cause: e });
      }
    }
    credentials = grpcCredentials.createSsl(root);
  }
  return { target, credentials, token, timeoutText };
}

function timeoutMs(text: string, where: string): number {
  const seconds = Number(text);
  if (text.trim() === "" || !Number.isFinite(seconds) || seconds <= 0) {
    throw new TypeError(`${where}: timeout must be a positive number of seconds, got ${JSON.stringify(text)}`);
  }
  return seconds * 1000;
}

/**
 * Channel options: message sizes, and a retry policy (a few attempts with backoff on
 * UNAVAILABLE) for the calls that are safe to repeat: reads, deletes, and appends and
 * ingestions, which the servers de-duplicate by event id (rules S6.4, M1.3). Channelz, whose
 * bookkeeping every call pays for, is off unless `extra` turns it on. The HTTP/2 flow-control
 * window holds the largest reply: with HTTP/2's default of 64 KiB, a reply larger than that (a
 * listing of 1,000 sessions, a 1,000-event session) waits for the client's window updates.
 */
export function channelOptions(
  service: string,
  retried: readonly string[],
  extra: ChannelOptions = {},
): ChannelOptions {
  const serviceConfig = {
    methodConfig: [
      {
        name: retried.map((method) => ({ service, method })),
        retryPolicy: {
          maxAttempts: 4,
          initialBackoff: "0.1s",
          maxBackoff: "2s",
          backoffMultiplier: 2,
          retryableStatusCodes: ["UNAVAILABLE"],
        },
      },
    ],
  };
  return {
    "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
    "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
    "grpc.service_config": JSON.stringify(serviceConfig),
    "grpc.enable_channelz": 0,
    "grpc-node.flow_control_window": MAX_MESSAGE_BYTES,
    ...extra,
  };
}

/** The metadata and deadline of one call. */
export class CallSettings {
  private readonly metadata = new Metadata();
  constructor(
    token: string | undefined,
    private readonly timeoutMs: number | undefined,
  ) {
    if (token !== undefined) {
      this.metadata.set("authorization", `Bearer ${token}`);
    }
  }

  /** The deadline of a call starting now (epoch milliseconds), if calls have one. */
  deadline(): number | undefined {
    return this.timeoutMs === undefined ? undefined : Date.now() + this.timeoutMs;
  }

  /** Metadata and options of a unary call, by default with its deadline counted from now. */
  unary(deadline = this.deadline()): [Metadata, CallOptions] {
    return [this.metadata.clone(), deadline === undefined ? {} : { deadline }];
  }

  /** Metadata of a stream, which runs until cancelled. */
  stream(): Metadata {
    return this.metadata.clone();
  }
}

type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (error: ServiceError | null, response: Res) => void,
) => unknown;

/**
 * Calls a unary method with the settings' metadata and deadline (or `deadline`, for a call that
 * continues an earlier attempt); rejects with the raw error.
 */
export function invoke<Req, Res>(
  method: UnaryMethod<Req, Res>,
  request: Req,
  settings: CallSettings,
  deadline = settings.deadline(),
): Promise<Res> {
  const [metadata, options] = settings.unary(deadline);
  return new Promise((resolve, reject) => {
    method(request, metadata, options, (error, response) => {
      if (error === null) resolve(response);
      else reject(error);
    });
  });
}

/**
 * An error of the shape grpc-js gives a failed call, for a status (a gRPC status code number)
 * that came another way.
 */
export function statusError(number: number, details: string): ServiceError {
  const code = STATUS_CODES.get(number) ?? status.UNKNOWN;
  return Object.assign(new Error(`${code} ${status[code]}: ${details}`), { code, details, metadata: new Metadata() });
}

const STATUS_CODES = new Map(
  Object.values(status)
    .filter((code) => typeof code === "number")
    .map((code) => [code as number, code]),
);

/** The status code of a failed call, or undefined for any other error. */
export function codeOf(error: unknown): status | undefined {
  return isServiceError(error) ? error.code : undefined;
}
