// Typed access to `baton serve` for TypeScript apps: the protocol's params and results
// (docs/service.md) and a small client over vscode-jsonrpc. Copy this file into an app, or
// use it as the reference for the wire format.
//
// Naming: every param and result field is snake_case, as in the decision contract, and each
// result is exactly what the matching `baton ... --json` command prints (docs/service.md).
// tests/schema.rs checks these types against `baton schema decision` and the `results` of
// `baton schema service`. The method names stay as they were (`completeRun`, `mergeBack`).
import { spawn, type ChildProcess } from "node:child_process";
import * as rpc from "vscode-jsonrpc/node.js";

export interface PolicyRef {
  name: string;
  sha256: string;
}

export type Strategy =
  | "no_handoff"
  | "delta_existing"
  | "full_existing"
  | "full_new"
  | "native_fork"
  | "unsupported";

export type HandoffStrategy =
  | "delta_since_target_last_seen"
  | "full_thread_summary"
  | "fork_delta_summary"
  | "checkpoint_summary"
  | "manual_context";

export interface RunRange {
  from: number;
  to: number;
}

/** The decision (`baton schema decision`; tests/schema.rs checks this type against it). */
export interface Decision {
  policy: PolicyRef;
  target: string;
  strategy: Strategy;
  handoff_strategy: HandoffStrategy | null;
  provider_thread: { action: "resume" | "create" | "fork_native" | "none"; id: string | null };
  covered_runs: RunRange | null;
  stale: string[];
  delivery: {
    mode: "off_band" | "inline";
    inline_limit: number;
    /** The off-band document's path; null when inline. */
    document: string | null;
    /** Why delivery is not what the policy chose (an off-band write that failed, ...). */
    fallback_reason?: string;
    /** The kind of that failure (the `baton` command adds "run `baton gc`" to `disk_full`). */
    fallback_kind?: "invalid_id" | "not_writable" | "disk_full" | "unsafe_path" | "io" | "invalid_grant" | "store";
    /** Set when the inline prompt cannot fit `inline_limit` (the message is never cut). */
    inline_note?: string;
  } | null;
  pregrant: { tool: string; path: string; turns: number; uses: number } | null;
  run: number;
  handoff_id: string | null;
  decided_by: { rule: string; at: string; because: string | null };
  /** How the handoff was fitted to its budget (docs/rendering.md#budgets) and absent without one. */
  budget?: {
    scope: "first_turn" | "document";
    limit: number;
    first_turn_limit: number;
    /** Where first_turn_limit comes from when it is the policy's `turn max`; absent for the target's cap. */
    first_turn_source?: "target" | "turn_max" | "turn_max_none";
    document_limit: number;
    replaced_chars?: number;
    before: number;
    after: number;
    first_turn: number;
    steps: { step: string; before: number; after: number; dropped: string[] }[];
    kept: boolean;
    reasons?: string[];
    /** Changed files counted, not named: even grouped by directory their names do not fit. */
    files_counted?: { counted: number; grouped: number };
    /** What the handoff could not keep that a reader relies on, in words. */
    warnings?: string[];
  };
  /** The clock and the workspace (docs/facts.md#time-and-workspace). Absent when the state has neither. */
  workspace?: {
    /** The one line `baton explain` shows: idle time, HEAD moved, files changed outside the thread. */
    line?: string;
    /** Why a fact is null or bounded. */
    notes?: string[];
    /** The workspace note to send with the first turn when there is no handoff. */
    note?: string;
  };
  /** What secret redaction replaced per rule (docs/redaction.md): distinct secrets and the ids of the items that held them. Never a secret. Absent when nothing was redacted. */
  redactions?: { rule: string; count: number; items: string[] }[];
  /** Every rule evaluated. Left out when the request says `trace: false` (about 8 KB saved). */
  trace?: unknown[];
}

/** A recorded handoff (store). */
export interface HandoffRecord {
  id: string;
  document_path: string | null;
  inline: string;
  status: "pending" | "ready" | "failed" | "superseded";
  covered: RunRange;
  /** Only for a fork's merge-back: the fork whose runs `covered` counts. */
  covered_thread?: string;
  strategy: HandoffStrategy;
  transfer: string | null;
  supersedes: string | null;
}

/** Where a native fork forks the parent's provider thread (docs/store.md#dispatch). */
export interface ForkPoint {
  parent_thread: string;
  /** The parent's provider thread to fork with the provider's own fork API. */
  provider_thread: string;
  /** The fork point: the parent's run the fork was made at. */
  run: number;
  /** Fork after this turn of that provider thread (how many of its turns the fork keeps). */
  turn: number;
}

/** The result of `dispatch` / `mergeBack` / `regenerate` (what `baton dispatch --json` prints): the decision plus what was recorded. */
export interface Dispatched extends Decision {
  handoff: HandoffRecord | null;
  /** A fork's merge-back the run takes beside a handoff of its own. */
  merge_back?: HandoffRecord;
  /** Set for a fork's first run that forks natively (`provider_thread.action` is `fork_native`). */
  fork_point: ForkPoint | null;
  recorded: { run: number; provider_thread: string | null; started: boolean };
  /** The run's one first-turn prompt: what to send as its first message (both handoffs and the message in one when a merge-back rides beside a handoff of its own - docs/store.md#merge-back). */
  prompt: string | null;
}

/** A provider thread a rollback changed and what the app must do with it (docs/store.md#rollback). */
export interface ProviderThreadChange {
  id: string;
  provider: string;
  status: "rolled_back" | "divergent";
  /** The rolled-back runs this provider thread ran: its turns that were undone. */
  runs_undone: number[];
  /** Its turns that stay: roll the provider thread back to this many turns. */
  turns_kept: number;
  /** roll_back: use the provider's rollback (keep `turns_kept` turns) and resume it. keep: it is resumed as it is. discard: it is never resumed again. */
  app_action: "roll_back" | "keep" | "discard";
  /** The next run on this provider as the serving policy decides it now. */
  next_run: {
    run: number;
    strategy: Strategy;
    provider_thread: Decision["provider_thread"];
    stale: string[];
    because: string | null;
  } | null;
}

export interface Explained {
  policy: PolicyRef;
  decision: Decision;
  explanation: string;
}

/** The result of `render` (what `baton render --json` prints). */
export interface Rendered {
  policy: PolicyRef;
  decision: Decision;
  handoff: {
    document: string;
    inline: string;
    provenance: Record<string, unknown>;
    document_path: string | null;
    inline_note: string | null;
  } | null;
}

/** The result of `rollback` (what `baton rollback --json` prints). */
export interface RollbackReport {
  thread: string;
  to: number;
  runs_rolled_back: number[];
  handoffs_superseded: string[];
  provider_threads: ProviderThreadChange[];
  compact_summary_dropped: boolean;
}

/** The result of `fork` (what `baton fork --json` prints). */
export interface ForkReport {
  parent: string;
  child: string;
  at: number;
  transfer: string;
}

/** The result of `thread/import` (one element of `baton db import --json`). */
export interface Imported {
  thread: string;
  runs: number;
}

export interface Completed {
  thread: string;
  run: number;
  status: "completed" | "failed" | "interrupted";
  items: number;
  handoff_consumed: string | null;
}

export interface Verdict {
  allow: boolean;
  reason: string;
}

export interface Diagnostic {
  severity: string;
  file: string;
  line: number;
  col: number;
  message: string;
  help?: string | null;
}

export interface PolicyStatus {
  name: string;
  sha256: string;
  spec: string;
  templates_dir: string | null;
  files: string[];
  generation: number;
  loaded_at_ms: number;
  warnings: Diagnostic[];
  last_rejection: { at_ms: number; message: string; diagnostics: Diagnostic[] } | null;
}

export interface Health {
  status: "ok";
  version: string;
  uptime_ms: number;
  in_flight: number;
  queued_threads: number;
  policy: PolicyRef;
  methods: string[];
}

/** A thread's state: a state document (DESIGN §3), or its YAML/JSON text, or a stored id. */
export type StateSource =
  | { state: Record<string, unknown> }
  | { state_text: string }
  | { thread: string };

export interface Item {
  kind: string;
  [field: string]: unknown;
}

export interface Notifications {
  "policy/loaded": { policy: PolicyRef; changed: boolean; generation: number };
  "policy/rejected": { message: string; diagnostics: Diagnostic[]; serving: PolicyRef };
  "handoffs/collected": {
    removed: { path: string; reason: string }[];
    kept: number | null;
    warnings: string[];
  };
}

/** A typed connection to a `baton serve --stdio` child process. */
export class Baton {
  readonly conn: rpc.MessageConnection;
  readonly exited: Promise<number | null>;

  private constructor(readonly child: ChildProcess) {
    if (!child.stdout || !child.stdin) throw new Error("baton serve needs piped stdio");
    this.conn = rpc.createMessageConnection(
      new rpc.StreamMessageReader(child.stdout),
      new rpc.StreamMessageWriter(child.stdin),
    );
    this.exited = new Promise((ok) => child.on("exit", (code) => ok(code)));
    this.conn.listen();
  }

  /** Spawn `bin serve --stdio ...args` with `env` added to this process's environment. */
  static spawn(bin: string, args: string[], env: Record<string, string> = {}): Baton {
    const child = spawn(bin, ["serve", "--stdio", ...args], {
      env: { ...process.env, ...env },
      stdio: ["pipe", "pipe", "inherit"],
    });
    return new Baton(child);
  }

  on<M extends keyof Notifications>(method: M, f: (params: Notifications[M]) => void): void {
    this.conn.onNotification(method, f);
  }

  private req<T>(method: string, params: object = {}): Promise<T> {
    return this.conn.sendRequest<T>(method, params);
  }

  health(): Promise<Health> {
    return this.req("health");
  }
  policyStatus(): Promise<PolicyStatus> {
    return this.req("policy/status");
  }
  explain(src: StateSource & { target?: string; verbose?: boolean; trace?: boolean }): Promise<Explained> {
    return this.req("explain", src);
  }
  render(src: StateSource & { target?: string; trace?: boolean }): Promise<Rendered> {
    return this.req("render", src);
  }
  importThread(p: { state: Record<string, unknown>; replace?: boolean }): Promise<Imported> {
    return this.req("thread/import", p);
  }
  exportThread(p: { thread: string }): Promise<{ state: Record<string, unknown> }> {
    return this.req("thread/export", p);
  }
  dispatch(p: { thread: string; target: string; message?: string; model?: string; runtime_mode?: string; clean_context?: boolean; trace?: boolean; at?: string; cwd?: string }): Promise<Dispatched> {
    return this.req("dispatch", p);
  }
  completeRun(p: { thread: string; run: number; items: Item[]; status?: Completed["status"]; ended_at?: string; cwd?: string }): Promise<Completed> {
    return this.req("completeRun", p);
  }
  rollback(p: { thread: string; to: number }): Promise<RollbackReport> {
    return this.req("rollback", p);
  }
  fork(p: { thread: string; at: number; child?: string }): Promise<ForkReport> {
    return this.req("fork", p);
  }
  mergeBack(p: { thread: string; message?: string; trace?: boolean }): Promise<Dispatched> {
    return this.req("mergeBack", p);
  }
  regenerate(p: { thread: string; handoff: string; message?: string; trace?: boolean }): Promise<Dispatched> {
    return this.req("regenerate", p);
  }
  pregrantCheck(
    p: { thread: string; run: number; tool: string } & ({ path: string } | { args: Record<string, unknown> }),
  ): Promise<Verdict> {
    return this.req("pregrant/check", p);
  }
  /** Any method by name (for calls this file has no typed wrapper for, or bad-input tests). */
  call(method: string, params: object = {}): Promise<unknown> {
    return this.req(method, params);
  }

  /** `shutdown`, then `exit`; resolves to the process's exit code. */
  async close(): Promise<number | null> {
    await this.req("shutdown");
    await this.conn.sendNotification("exit");
    const code = await this.exited;
    this.conn.dispose();
    return code;
  }
}
