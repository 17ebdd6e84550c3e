import { spawn, type ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import { connect } from "node:net";
import type { Readable, Writable } from "node:stream";
import { BatonError, ErrorCode, fromRpcError } from "./errors.js";
import { resolveBinary, VERSION } from "./platform.js";
import type {
  CompleteParams,
  Completed,
  DecideParams,
  DispatchParams,
  DispatchReport,
  ExplainReport,
  ForkParams,
  ForkReport,
  ImportParams,
  ImportReport,
  MergeBackParams,
  PolicyRef,
  PregrantParams,
  RegenerateParams,
  RenderReport,
  RollbackParams,
  RollbackReport,
  State,
  ThreadParams,
  Verdict,
} from "./generated/schema.js";

/** How to run the sidecar (`baton serve --stdio`). */
export interface ClientOptions {
  /** The `baton` binary (default `$BATON_BINARY`, else the platform package's). */
  binary?: string;
  /** `--policy`: a policy file, directory or shipped profile (default `default`). */
  policy?: string;
  /** `--db`: the store (default `$BATON_DB`, then `./baton.db` in `cwd`). */
  db?: string;
  /** `--templates`: templates overriding the embedded ones. */
  templates?: string;
  /** `--handoff-dir`: the off-band document root. */
  handoffDir?: string;
  /** More `baton serve` flags (`--no-watch`, `--debounce-ms 50`, ...). */
  args?: string[];
  /** The sidecar's environment (default this process's). */
  env?: NodeJS.ProcessEnv;
  /** The sidecar's working directory. */
  cwd?: string;
  /** The timeout of every request, in milliseconds (default none; a request can set its own). */
  timeoutMs?: number;
  /**
   * Restart the sidecar after it exits unexpectedly, with exponential backoff (default on:
   * up to 5 attempts in a row, 100 ms doubling to 5 s); `false`: never.
   */
  restart?: false | { retries?: number; initialDelayMs?: number; maxDelayMs?: number };
  /** How long `close()` waits for the sidecar to exit before it kills it (default 5000 ms). */
  closeGraceMs?: number;
  /**
   * Let Node exit while no request is waiting (default false: a started client keeps Node
   * running until `close()`, as a child process does). When Node exits, the sidecar's input
   * ends and it exits too; a crash of an idle sidecar is then not noticed.
   */
  allowExitOnIdle?: boolean;
}

/** Per-request options. */
export interface RequestOptions {
  /** Fail with `Timeout` (and cancel the request on the service) after this many milliseconds. */
  timeoutMs?: number;
  /**
   * Cancel the request: `$/cancelRequest` is sent and the service answers. A read (`explain`,
   * `render`, `thread/export`, `health`, ...) then fails with `RequestCancelled` (-32800); a
   * change the service already started (`dispatch`, `completeRun`, ...) runs to the end and the
   * promise gets its result: a committed change is never reported as cancelled.
   */
  signal?: AbortSignal;
}

/** A state given inline: a state document object or its YAML/JSON text (`state_text`). */
export type InlineDecideParams = Omit<DecideParams, "state"> & { state?: State | Record<string, unknown> };
export type InlineImportParams = Omit<ImportParams, "state"> & { state?: State | Record<string, unknown> };

/** `health`'s result. */
export interface Health {
  status: "ok";
  version: string;
  uptime_ms: number;
  in_flight: number;
  queued_threads: number;
  policy: PolicyRef;
  methods: string[];
}

/** `policy/status`'s result. */
export interface PolicyStatus {
  name: string;
  sha256: string;
  spec: string;
  templates_dir: string | null;
  files: string[];
  generation: number;
  loaded_at_ms: number;
  warnings: unknown[];
  last_rejection: null | { at_ms: number; message: string; diagnostics: unknown[] };
}

/** `metrics`'s result: the Prometheus exposition text and its samples by metric name. */
export interface Metrics {
  content_type: string;
  text: string;
  samples: Record<string, { labels: Record<string, string>; value: number | null }[]>;
}

/** `status`'s result (`baton status --json`). */
export interface Status {
  version: string;
  uptime_ms: number;
  policy: { name: string; sha256: string; spec: string; generation: number; loaded_at_ms: number };
  last_reload_error: string | null;
  shadow: null | { name: string; sha256: string; spec: string; loaded_at_ms: number };
  store: { path: string; threads: number; runs: number; documents: number; bytes: number } | { path: string; error: string };
  decision_log: { enabled: boolean; error: string | null };
  in_flight: number;
}

/** The notifications of the service, and the client's own events. */
export interface ClientEvents {
  /** A changed policy set checked and now serves (`policy/loaded`). */
  "policy/loaded": [params: { policy: PolicyRef; changed: true; generation: number }];
  /** A changed policy set did not check; the old one still serves (`policy/rejected`). */
  "policy/rejected": [params: { message: string; diagnostics: unknown[]; serving: PolicyRef }];
  /** A periodic sweep removed off-band documents (`handoffs/collected`). */
  "handoffs/collected": [params: { removed: { path: string; reason: string }[]; kept: number; warnings: string[] }];
  /** The decision log cannot be written (a full disk); decisions are still answered (`log/degraded`). */
  "log/degraded": [params: { message: string }];
  /** The decision log is written again (`log/recovered`). */
  "log/recovered": [params: Record<string, never>];
  /** Any notification, by method. */
  notification: [method: string, params: unknown];
  /** The sidecar exited unexpectedly (requests in flight failed with `SidecarExited`). */
  exit: [info: { code: number | null; signal: NodeJS.Signals | null; stderr: string }];
  /** A new sidecar answered `health` after a crash. */
  restart: [info: { attempt: number; pid: number | undefined }];
  /** Restarting gave up; the client is closed and every request fails with this error. */
  restartFailed: [error: BatonError];
  /** A chunk of the sidecar's standard error. */
  stderr: [chunk: string];
}

interface Pending {
  method: string;
  resolve: (v: unknown) => void;
  reject: (e: BatonError) => void;
  cleanup: () => void;
}

/** Content-Length framing (the LSP base protocol), what `baton serve` speaks by default. */
class Connection {
  #buf: Buffer = Buffer.alloc(0);
  #closed = false;

  constructor(
    readable: Readable,
    private readonly writable: Writable,
    onMessage: (m: Record<string, unknown>) => void,
    onBad: (why: string) => void,
  ) {
    readable.on("data", (chunk: Buffer) => {
      this.#buf = this.#buf.length === 0 ? chunk : Buffer.concat([this.#buf, chunk]);
      for (;;) {
        const end = this.#buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const header = this.#buf.subarray(0, end).toString("latin1");
        const m = /content-length:\s*(\d+)/i.exec(header);
        if (!m) {
          onBad(`a message from baton has no Content-Length header: ${JSON.stringify(header.slice(0, 100))}`);
          this.#buf = this.#buf.subarray(end + 4);
          continue;
        }
        const len = Number(m[1]);
        const start = end + 4;
        if (this.#buf.length < start + len) return;
        const body = this.#buf.subarray(start, start + len).toString("utf8");
        this.#buf = this.#buf.subarray(start + len);
        let msg: unknown;
        try {
          msg = JSON.parse(body);
        } catch {
          onBad(`a message from baton is not JSON: ${body.slice(0, 100)}`);
          continue;
        }
        if (msg && typeof msg === "object") onMessage(msg as Record<string, unknown>);
      }
    });
    writable.on("error", () => {
      // The peer went away: its exit (or the socket's close) is reported instead.
      this.#closed = true;
    });
  }

  send(msg: unknown): boolean {
    if (this.#closed || this.writable.destroyed || this.writable.writableEnded) return false;
    const body = Buffer.from(JSON.stringify(msg), "utf8");
    this.writable.write(`Content-Length: ${body.length}\r\n\r\n`);
    this.writable.write(body);
    return true;
  }

  end(): void {
    this.#closed = true;
    this.writable.end();
  }
}

type Phase = "starting" | "ready" | "restarting" | "closing" | "closed";

/**
 * A client of the baton sidecar (`baton serve`): spawns it over stdio (`BatonClient.start`)
 * or connects to a running service's socket (`BatonClient.connect`), and sends typed requests.
 * Errors are `BatonError`s carrying the JSON-RPC code. After a crash the sidecar is restarted
 * with backoff (stdio mode); `close()` shuts it down cleanly.
 */
export class BatonClient extends EventEmitter<ClientEvents> {
  readonly #opts: ClientOptions;
  readonly #socketPath: string | undefined;
  #child: ChildProcess | undefined;
  #conn: Connection | undefined;
  #pending = new Map<number, Pending>();
  #nextId = 1;
  #phase: Phase = "starting";
  #ready: Promise<void> = Promise.resolve();
  #readyResolve: () => void = () => {};
  #readyReject: (e: BatonError) => void = () => {};
  #stderr = "";
  #exited: Promise<void> = Promise.resolve();
  #attempt = 0;
  #failure: BatonError | undefined;
  /** The handles that keep Node running while a request waits for its answer. */
  #handles: { ref(): unknown; unref(): unknown }[] = [];

  private constructor(opts: ClientOptions, socketPath?: string) {
    super();
    this.#opts = opts;
    this.#socketPath = socketPath;
    this.#resetReady();
  }

  /**
   * Spawn `baton serve --stdio` and wait until it answers `health`. A binary that cannot be
   * found, is another version, or a sidecar that exits at start (a policy that does not check,
   * a bad flag) is a `BatonError` with the sidecar's message.
   */
  static async start(opts: ClientOptions = {}): Promise<BatonClient> {
    const c = new BatonClient(opts);
    await c.#spawn();
    c.#phase = "ready";
    c.#readyResolve();
    return c;
  }

  /** Connect to a service listening on a Unix socket (`baton serve --socket PATH`). */
  static async connect(socketPath: string, opts: Pick<ClientOptions, "timeoutMs"> = {}): Promise<BatonClient> {
    const c = new BatonClient({ ...opts, restart: false }, socketPath);
    await c.#connectSocket(socketPath);
    c.#phase = "ready";
    c.#readyResolve();
    return c;
  }

  /** The sidecar's process id (stdio mode), for monitoring. */
  get pid(): number | undefined {
    return this.#child?.pid;
  }

  #resetReady(): void {
    this.#ready = new Promise<void>((res, rej) => {
      this.#readyResolve = res;
      this.#readyReject = rej;
    });
    // A rejection nobody waits for is not an unhandled rejection.
    this.#ready.catch(() => {});
  }

  /** Keep Node running exactly while a request waits for its answer. */
  #track(): void {
    if (!this.#opts.allowExitOnIdle) return;
    for (const h of this.#handles) {
      if (this.#pending.size > 0) h.ref();
      else h.unref();
    }
  }

  #onMessage = (m: Record<string, unknown>): void => {
    if (typeof m.id === "number" && ("result" in m || "error" in m)) {
      const p = this.#pending.get(m.id);
      if (!p) return;
      this.#pending.delete(m.id);
      p.cleanup();
      if ("error" in m && m.error) p.reject(fromRpcError(m.error, p.method));
      else p.resolve(m.result);
    } else if (typeof m.method === "string" && !("id" in m)) {
      (this.emit as (e: string, ...a: unknown[]) => boolean)(m.method, m.params);
      this.emit("notification", m.method, m.params);
    }
  };

  async #spawn(): Promise<void> {
    const o = this.#opts;
    const bin = resolveBinary(o.binary);
    const args = ["serve", "--stdio"];
    if (o.policy) args.push("--policy", o.policy);
    if (o.db) args.push("--db", o.db);
    if (o.templates) args.push("--templates", o.templates);
    if (o.handoffDir) args.push("--handoff-dir", o.handoffDir);
    args.push(...(o.args ?? []));
    this.#stderr = "";
    const child = spawn(bin, args, { stdio: ["pipe", "pipe", "pipe"], env: o.env ?? process.env, cwd: o.cwd });
    this.#child = child;
    // With allowExitOnIdle, an idle client does not keep Node running: the process and its
    // pipes are unref'd, and the process and its output are ref'd only while a request waits
    // (#track). When Node exits, the sidecar's input ends and it exits.
    if (o.allowExitOnIdle) {
      for (const s of [child.stdin, child.stderr] as unknown as ({ unref?: () => void } | null)[]) s?.unref?.();
    }
    this.#handles = [child, child.stdout as unknown as { ref(): unknown; unref(): unknown }];
    this.#track();
    let exitedResolve: () => void = () => {};
    this.#exited = new Promise<void>((r) => (exitedResolve = r));
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (s: string) => {
      this.#stderr = (this.#stderr + s).slice(-8192);
      this.emit("stderr", s);
    });
    let done = false;
    const onGone = (code: number | null, signal: NodeJS.Signals | null, err?: Error): void => {
      if (done) return;
      done = true;
      exitedResolve();
      this.#onExit(child, code, signal, err);
    };
    // 'close' comes after the process exited and its stdio ended: every byte it wrote (its
    // last response, its last stderr line) has been read by then.
    child.on("close", (code, signal) => onGone(code, signal));
    child.on("error", (err) => onGone(null, null, err));
    this.#conn = new Connection(child.stdout!, child.stdin!, this.#onMessage, (why) => this.emit("stderr", `${why}\n`));
    const h = (await this.#send("health", {}, {})) as Health;
    if (h.version !== VERSION) {
      child.kill("SIGKILL");
      throw new BatonError(
        ErrorCode.VersionMismatch,
        `the baton sidecar ${bin} is version ${h.version}, but @baton-engine/baton is ${VERSION}: install the same version of both`,
      );
    }
  }

  #onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null, err?: Error): void {
    if (child !== this.#child) return;
    this.#conn = undefined;
    const stderr = this.#stderr.trim();
    const starting = this.#phase === "starting" || this.#phase === "restarting";
    const how = err ? `could not be run (${err.message})` : signal ? `was killed by ${signal}` : `exited with status ${code}`;
    const tail = stderr ? `: ${stderr.split("\n").slice(-5).join("\n")}` : "";
    const failure = starting
      ? new BatonError(
          ErrorCode.SidecarStartFailed,
          `the baton sidecar ${how} at start${tail}` +
            (tail ? "" : " (no message)") +
            `; fix what it says (the --policy, --db or flags given) and start the client again`,
        )
      : undefined;
    for (const [id, p] of this.#pending) {
      this.#pending.delete(id);
      p.cleanup();
      p.reject(
        failure ??
          new BatonError(
            ErrorCode.SidecarExited,
            `the baton sidecar ${how} while \`${p.method}\` was in flight${tail}; ` +
              (this.#opts.restart === false || this.#phase === "closing"
                ? "start a new client"
                : "it is being restarted: send the request again (a change it made before it exited is kept)"),
            undefined,
            p.method,
          ),
      );
    }
    if (this.#phase === "closing" || this.#phase === "closed" || this.#phase === "starting") return;
    if (this.#phase === "restarting") return; // #restart sees the failed start
    this.emit("exit", { code, signal, stderr });
    if (this.#opts.restart === false) {
      this.#fail(new BatonError(ErrorCode.SidecarExited, `the baton sidecar ${how}${tail}; restarting is off: start a new client`));
      return;
    }
    this.#phase = "restarting";
    this.#resetReady();
    void this.#restart();
  }

  async #restart(): Promise<void> {
    const r = this.#opts.restart || {};
    const retries = r.retries ?? 5;
    const initial = r.initialDelayMs ?? 100;
    const max = r.maxDelayMs ?? 5000;
    let last: BatonError | undefined;
    for (let i = 0; i < retries; i++) {
      const delay = Math.min(max, initial * 2 ** this.#attempt);
      this.#attempt++;
      await new Promise((res) => setTimeout(res, delay));
      if (this.#phase !== "restarting") return;
      try {
        await this.#spawn();
        if (this.#phase !== "restarting") return;
        this.#phase = "ready";
        this.emit("restart", { attempt: this.#attempt, pid: this.#child?.pid });
        this.#attempt = 0;
        this.#readyResolve();
        return;
      } catch (e) {
        last = e instanceof BatonError ? e : new BatonError(ErrorCode.SidecarStartFailed, String(e));
        if (last.code === ErrorCode.VersionMismatch || last.code === ErrorCode.BinaryNotFound) break;
      }
    }
    const e = new BatonError(
      ErrorCode.SidecarExited,
      `the baton sidecar could not be restarted after it exited (${this.#attempt} attempts): ${last?.message ?? "closed"}`,
    );
    this.emit("restartFailed", e);
    this.#fail(e);
  }

  #fail(e: BatonError): void {
    this.#phase = "closed";
    this.#failure = e;
    this.#readyReject(e);
  }

  async #connectSocket(path: string): Promise<void> {
    const sock = connect(path);
    await new Promise<void>((res, rej) => {
      sock.once("connect", res);
      sock.once("error", (e: NodeJS.ErrnoException) =>
        rej(
          new BatonError(
            ErrorCode.SidecarStartFailed,
            `cannot connect to the baton service at ${path} (${e.code ?? e.message}): start it with \`baton serve --socket ${path}\``,
          ),
        ),
      );
    });
    sock.on("error", () => {});
    sock.on("close", () => {
      const e = new BatonError(ErrorCode.SidecarExited, `the connection to the baton service at ${path} closed`);
      for (const [id, p] of this.#pending) {
        this.#pending.delete(id);
        p.cleanup();
        p.reject(new BatonError(e.code, `${e.message} while \`${p.method}\` was in flight; connect again`, undefined, p.method));
      }
      this.#conn = undefined;
      if (this.#phase !== "closing") this.#fail(e);
      this.#phase = "closed";
    });
    this.#exited = new Promise<void>((r) => sock.once("close", () => r()));
    this.#conn = new Connection(sock, sock, this.#onMessage, (why) => this.emit("stderr", `${why}\n`));
    this.#handles = [sock];
    await this.#send("health", {}, {});
  }

  /** Send one request now (the connection must be up). */
  #send(method: string, params: unknown, o: RequestOptions): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const signal = o.signal;
      if (signal?.aborted) {
        reject(new BatonError(ErrorCode.RequestCancelled, `\`${method}\` was cancelled before it was sent`, undefined, method));
        return;
      }
      const conn = this.#conn;
      const id = this.#nextId++;
      let timer: NodeJS.Timeout | undefined;
      const onAbort = (): void => {
        // The service answers: -32800 for a read or a queued request, the result for a change
        // that already started.
        this.#conn?.send({ jsonrpc: "2.0", method: "$/cancelRequest", params: { id } });
      };
      const cleanup = (): void => {
        if (timer) clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        queueMicrotask(() => this.#track());
      };
      this.#pending.set(id, { method, resolve, reject, cleanup });
      this.#track();
      const timeoutMs = o.timeoutMs ?? this.#opts.timeoutMs;
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => {
          if (!this.#pending.delete(id)) return;
          cleanup();
          this.#conn?.send({ jsonrpc: "2.0", method: "$/cancelRequest", params: { id } });
          reject(
            new BatonError(
              ErrorCode.Timeout,
              `\`${method}\` took longer than ${timeoutMs} ms; it was cancelled on the service (a change it had started still completes)`,
              undefined,
              method,
            ),
          );
        }, timeoutMs);
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      if (!conn || !conn.send({ jsonrpc: "2.0", id, method, params })) {
        this.#pending.delete(id);
        cleanup();
        reject(new BatonError(ErrorCode.SidecarExited, `the baton sidecar is not running: \`${method}\` was not sent`, undefined, method));
      }
    });
  }

  /**
   * Send a request, after a restart in progress completes. Typed methods (`explain`,
   * `dispatch`, ...) call this; use it for a method this version does not wrap.
   */
  async request<T = unknown>(method: string, params: unknown = {}, o: RequestOptions = {}): Promise<T> {
    if (this.#phase === "closed" || this.#phase === "closing") {
      throw this.#failure ?? new BatonError(ErrorCode.ClientClosed, `the client is closed: \`${method}\` was not sent`, undefined, method);
    }
    if (this.#phase !== "ready") await this.#ready;
    return (await this.#send(method, params, o)) as T;
  }

  /** Decide and explain (`baton explain --json` as `decision`). */
  explain(params: InlineDecideParams, o?: RequestOptions): Promise<ExplainReport> {
    return this.request("explain", params, o);
  }
  /** Decide and render the handoff (`baton render --json`). */
  render(params: Omit<InlineDecideParams, "verbose">, o?: RequestOptions): Promise<RenderReport> {
    return this.request("render", params, o);
  }
  /** Store a thread (`thread/import`). */
  importThread(params: InlineImportParams, o?: RequestOptions): Promise<ImportReport> {
    return this.request("thread/import", params, o);
  }
  /** A stored thread as a state document (`thread/export`). */
  exportThread(params: ThreadParams, o?: RequestOptions): Promise<{ state: State }> {
    return this.request("thread/export", params, o);
  }
  /** Decide, render, deliver and record the next run (`baton dispatch --json`). */
  dispatch(params: DispatchParams, o?: RequestOptions): Promise<DispatchReport> {
    return this.request("dispatch", params, o);
  }
  /** Finish a running run (`baton complete --json`). */
  completeRun(params: CompleteParams, o?: RequestOptions): Promise<Completed> {
    return this.request("completeRun", params, o);
  }
  /** Roll a thread back (`baton rollback --json`). */
  rollback(params: RollbackParams, o?: RequestOptions): Promise<RollbackReport> {
    return this.request("rollback", params, o);
  }
  /** Fork a thread (`baton fork --json`). */
  fork(params: ForkParams, o?: RequestOptions): Promise<ForkReport> {
    return this.request("fork", params, o);
  }
  /** Hand a fork's runs back to its parent (`baton merge-back --json`). */
  mergeBack(params: MergeBackParams, o?: RequestOptions): Promise<DispatchReport> {
    return this.request("mergeBack", params, o);
  }
  /** Supersede a running run's handoff (`baton regenerate --json`). */
  regenerate(params: RegenerateParams, o?: RequestOptions): Promise<DispatchReport> {
    return this.request("regenerate", params, o);
  }
  /** May a tool call proceed without prompting (`baton pregrant check --json`)? */
  pregrantCheck(params: PregrantParams, o?: RequestOptions): Promise<Verdict> {
    return this.request("pregrant/check", params, o);
  }
  /** The policy set serving now. */
  policyStatus(o?: RequestOptions): Promise<PolicyStatus> {
    return this.request("policy/status", {}, o);
  }
  /** Put a candidate policy beside the active one (null removes it); it decides every request too and changes nothing (docs/operations.md). */
  policyShadow(spec: string | null, o?: RequestOptions): Promise<{ shadow: Status["shadow"] }> {
    return this.request("policy/shadow", { spec }, o);
  }
  /** Re-read and check the policy set now (`-32001` with `data.diagnostics` when it does not check). */
  policyReload(o?: RequestOptions): Promise<{ policy: PolicyRef; changed: boolean; generation: number }> {
    return this.request("policy/reload", {}, o);
  }
  /** The service's health. */
  health(o?: RequestOptions): Promise<Health> {
    return this.request("health", {}, o);
  }
  /** The service's metrics (what `--metrics` serves over HTTP). */
  metrics(o?: RequestOptions): Promise<Metrics> {
    return this.request("metrics", {}, o);
  }
  /** Versions, policies, store figures, uptime, the last reload error (`baton status`). */
  status(o?: RequestOptions): Promise<Status> {
    return this.request("status", {}, o);
  }

  /**
   * Shut down: the sidecar finishes every request in flight (their promises settle), then
   * exits; resolves once the process has exited and been reaped. A socket client only closes
   * its connection (the service keeps serving others).
   */
  async close(): Promise<void> {
    if (this.#phase === "closed" && !this.#child && !this.#conn) return;
    const wasRestarting = this.#phase === "restarting";
    this.#phase = "closing";
    this.#readyReject(new BatonError(ErrorCode.ClientClosed, "the client was closed"));
    if (this.#socketPath !== undefined) {
      for (const h of this.#handles) h.ref();
      this.#conn?.end();
      await this.#exited;
      this.#phase = "closed";
      return;
    }
    const child = this.#child;
    // Node keeps running until the sidecar has exited and been reaped.
    for (const h of this.#handles) h.ref();
    if (child && child.exitCode === null && child.signalCode === null && !wasRestarting) {
      try {
        await this.#send("shutdown", null, {});
      } catch {
        // Already gone: its exit is awaited below.
      }
      this.#conn?.send({ jsonrpc: "2.0", method: "exit" });
      this.#conn?.end();
      const grace = setTimeout(() => child.kill("SIGKILL"), this.#opts.closeGraceMs ?? 5000);
      await this.#exited;
      clearTimeout(grace);
    } else if (child && child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL");
      await this.#exited;
    }
    this.#phase = "closed";
    this.#child = undefined;
  }
}
