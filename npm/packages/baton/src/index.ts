/**
 * baton for Node.js (docs/node.md).
 *
 * - `Engine`: the policy engine in this process (the napi addon of the platform package
 *   `@baton-engine/addon-<platform>`, or `$BATON_ADDON`): decide, explain, render, check.
 * - `BatonClient`: a client of the `baton serve` sidecar (the binary of
 *   `@baton-engine/cli-<platform>`, or `$BATON_BINARY`): the same plus the store's lifecycle
 *   (dispatch, complete, rollback, fork, merge-back, regenerate, pre-grant checks), policy hot
 *   reload, restart after a crash.
 *
 * Both return exactly the JSON the `baton` command prints with `--json`; errors are
 * `BatonError`s carrying the service's JSON-RPC code.
 */
export { BatonError, ErrorCode, type ErrorCodeName } from "./errors.js";
export {
  Engine,
  type CheckResult,
  type DecideOptions,
  type EngineOptions,
  type ExplainOptions,
  type StateInput,
} from "./engine.js";
export {
  BatonClient,
  type ClientEvents,
  type ClientOptions,
  type Health,
  type InlineDecideParams,
  type InlineImportParams,
  type PolicyStatus,
  type RequestOptions,
} from "./client.js";
export {
  VERSION,
  PLATFORMS,
  platformKey,
  binaryPackage,
  addonPackage,
  resolveBinary,
  hasAddon,
} from "./platform.js";
export type * from "./generated/schema.js";
