/**
 * Every error this package throws is a `BatonError` with a numeric `code`.
 *
 * Codes from -32700 to -32001 are the JSON-RPC codes of `baton serve` (docs/service.md#errors);
 * the in-process engine throws the same codes for the same failures. Codes from -32090 to
 * -32099 are set by this package on the client side and never sent by the service.
 */
export const ErrorCode = {
  // The service's codes.
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** The request was cancelled (the service's answer to `$/cancelRequest`, or an AbortSignal). */
  RequestCancelled: -32800,
  /** The policy does not check, or cannot decide this state (`data.diagnostics`). */
  PolicyError: -32001,
  /** The state is invalid (`data.problems`: `{at, line, column, message}`). */
  StateError: -32002,
  NotFound: -32003,
  StoreError: -32004,
  RenderError: -32005,
  DeliveryError: -32006,
  ShuttingDown: -32007,
  // This package's codes (client side).
  /** No `baton` binary for this platform (the platform package is missing, or BATON_BINARY is wrong). */
  BinaryNotFound: -32090,
  /** No addon for this platform (the addon package is missing, or BATON_ADDON is wrong). */
  AddonNotFound: -32091,
  /** The binary or addon is another version than this package. */
  VersionMismatch: -32092,
  /** The sidecar exited before it answered `health` at start. */
  SidecarStartFailed: -32093,
  /** The sidecar exited (crashed, was killed) while the request was in flight. */
  SidecarExited: -32094,
  /** The request took longer than its `timeoutMs`; it was cancelled on the service. */
  Timeout: -32095,
  /** The client was closed: the request was not sent or its answer will never come. */
  ClientClosed: -32096,
} as const;

export type ErrorCodeName = keyof typeof ErrorCode;

const names = new Map<number, ErrorCodeName>(
  Object.entries(ErrorCode).map(([k, v]) => [v, k as ErrorCodeName]),
);

/** An error from baton (the service, the in-process engine, or this package). */
export class BatonError extends Error {
  /** The JSON-RPC code (see `ErrorCode`). */
  readonly code: number;
  /** The error's `data`: `diagnostics` for a policy error, `problems` for a state error, ... */
  readonly data: unknown;
  /** The method the error answers, when it answers one. */
  readonly method: string | undefined;

  constructor(code: number, message: string, data?: unknown, method?: string) {
    super(message);
    this.name = "BatonError";
    this.code = code;
    this.data = data;
    this.method = method;
  }

  /** The name of `code` in `ErrorCode` (`"StateError"`, ...), or undefined for another code. */
  get codeName(): ErrorCodeName | undefined {
    return names.get(this.code);
  }
}

/** The error a JSON-RPC error object stands for. */
export function fromRpcError(e: unknown, method?: string): BatonError {
  if (e && typeof e === "object" && typeof (e as { code?: unknown }).code === "number") {
    const o = e as { code: number; message?: unknown; data?: unknown };
    return new BatonError(o.code, String(o.message ?? "error"), o.data, method);
  }
  return new BatonError(ErrorCode.InternalError, `malformed error from baton: ${JSON.stringify(e)}`, undefined, method);
}
