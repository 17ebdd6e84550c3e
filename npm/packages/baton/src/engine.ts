import { BatonError, ErrorCode, fromRpcError } from "./errors.js";
import type { Decision, ExplainReport, RenderReport, State } from "./generated/schema.js";
import { loadAddon, type NativeEngine } from "./platform.js";

/** A state: a state document object (docs/state.md), or its YAML or JSON text. */
export type StateInput = State | string;

/** Options of `decide`, `explain` and `render`. */
export interface DecideOptions {
  /** Decide for this provider instead of the state's `request.provider`. */
  target?: string;
  /** Keep the decision's `trace` (default true); false leaves it out (about 8 KB less). */
  trace?: boolean;
}

/** Options of `explain`. */
export interface ExplainOptions extends DecideOptions {
  /** Append every rule evaluated to `explanation` (`baton explain --verbose`). */
  verbose?: boolean;
}

/** Options of `new Engine`. */
export interface EngineOptions {
  /** The policy's text: `policy` is then only the name diagnostics and traces show. */
  policyText?: string;
  /** A directory of `*.j2` templates overriding the embedded ones by file name. */
  templatesDir?: string;
  /**
   * The off-band document root decisions name (default `$BATON_HANDOFF_DIR`, else
   * `<tmp>/baton-<uid>`, as `baton serve` does).
   */
  documentRoot?: string;
}

/** `baton check --json`'s element for one policy. */
export interface CheckResult {
  policy: string;
  ok: boolean;
  diagnostics: {
    severity: "error" | "warning";
    code?: string;
    file: string;
    line: number | null;
    col: number | null;
    message: string;
    help: string | null;
    range?: { start: number; end: number };
  }[];
}

function rethrow(e: unknown, method: string): never {
  const msg = e instanceof Error ? e.message : String(e);
  if (msg.startsWith("{")) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(msg);
    } catch {
      parsed = undefined;
    }
    if (parsed) throw fromRpcError(parsed, method);
  }
  throw new BatonError(ErrorCode.InternalError, msg, undefined, method);
}

type Method = "decide" | "explain" | "render";

/**
 * baton's engine in this process (the napi addon): a checked, compiled policy and template
 * set. Every result is the object `baton serve` and `baton ... --json` give; every error a
 * `BatonError` with the service's code. The `...Async` methods run on libuv's thread pool.
 */
export class Engine {
  readonly #native: NativeEngine;
  /** The policy's name, sha256 and lint warnings. */
  readonly policy: { name: string; sha256: string; warnings: CheckResult["diagnostics"] };

  /**
   * @param policy a policy file, a directory of `*.policy` files, or a shipped profile
   * (`default`, `t3code`, `t3code-legacy`, `mcode`); with `options.policyText`, its name.
   * @throws BatonError `PolicyError` (-32001) with `data.diagnostics` when it does not check;
   * `AddonNotFound` or `VersionMismatch` when the addon cannot be used.
   */
  constructor(policy: string, options: EngineOptions = {}) {
    const addon = loadAddon();
    const root = options.documentRoot ?? (process.env.BATON_HANDOFF_DIR || undefined);
    try {
      this.#native = new addon.NativeEngine(policy, options.policyText ?? null, options.templatesDir ?? null, root ?? null);
    } catch (e) {
      rethrow(e, "new Engine");
    }
    this.policy = JSON.parse(this.#native.policy()) as Engine["policy"];
  }

  /**
   * Check a policy (file, directory or shipped profile) without throwing: `ok` and the
   * diagnostics (errors, or the warnings of a policy that checks).
   */
  static check(policy: string): CheckResult {
    return JSON.parse(loadAddon().check(policy)) as CheckResult;
  }

  #call(method: Method, state: StateInput, o: ExplainOptions): string {
    try {
      return this.#native.call(method, ...args(state, o));
    } catch (e) {
      rethrow(e, method);
    }
  }

  async #callAsync(method: Method, state: StateInput, o: ExplainOptions): Promise<string> {
    try {
      return await this.#native.callAsync(method, ...args(state, o));
    } catch (e) {
      rethrow(e, method);
    }
  }

  /** The decision (what `baton explain --json` prints). */
  decide(state: StateInput, options: DecideOptions = {}): Decision {
    return JSON.parse(this.#call("decide", state, options)) as Decision;
  }

  /** `{policy, decision, explanation}`: the service's `explain` result. */
  explain(state: StateInput, options: ExplainOptions = {}): ExplainReport {
    return JSON.parse(this.#call("explain", state, options)) as ExplainReport;
  }

  /** `{policy, decision, handoff}`: the service's `render` result (`baton render --json`). */
  render(state: StateInput, options: DecideOptions = {}): RenderReport {
    return JSON.parse(this.#call("render", state, { ...options, verbose: false })) as RenderReport;
  }

  /** `decide` off the JavaScript thread. */
  async decideAsync(state: StateInput, options: DecideOptions = {}): Promise<Decision> {
    return JSON.parse(await this.#callAsync("decide", state, options)) as Decision;
  }

  /** `explain` off the JavaScript thread. */
  async explainAsync(state: StateInput, options: ExplainOptions = {}): Promise<ExplainReport> {
    return JSON.parse(await this.#callAsync("explain", state, options)) as ExplainReport;
  }

  /** `render` off the JavaScript thread. */
  async renderAsync(state: StateInput, options: DecideOptions = {}): Promise<RenderReport> {
    return JSON.parse(await this.#callAsync("render", state, { ...options, verbose: false })) as RenderReport;
  }
}

function args(state: StateInput, o: ExplainOptions): [string, boolean, string | null, boolean, boolean] {
  const object = typeof state !== "string";
  if (object && (state === null || typeof state !== "object" || Array.isArray(state))) {
    throw new BatonError(ErrorCode.InvalidParams, "`state` must be a state document object (docs/state.md) or its YAML/JSON text");
  }
  const text = object ? JSON.stringify(state) : state;
  return [text, object, o.target ?? null, o.verbose ?? false, o.trace ?? true];
}
