// Bad input: each is a BatonError with a code and a message that says what to do; nothing
// hangs.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { BatonClient, BatonError, Engine, ErrorCode } from "../dist/index.js";
import { binary, scratch } from "./helpers.mjs";

const dist = join(dirname(fileURLToPath(import.meta.url)), "..", "dist", "index.js");
const dir = scratch("bad");

const script = (name, body) => {
  const f = join(dir, name);
  writeFileSync(f, `#!/bin/sh\n${body}\n`);
  chmodSync(f, 0o755);
  return f;
};

async function startError(opts) {
  const e = await BatonClient.start({ db: join(dir, "b.db"), ...opts }).then(
    (c) => {
      c.close();
      assert.fail("the client started");
    },
    (e) => e,
  );
  assert.ok(e instanceof BatonError, String(e));
  return e;
}

/** What loading the package does in a fresh process with `env` (the addon is loaded once per process). */
function inChild(code, env) {
  const out = execFileSync(process.execPath, ["-e", `
    const b = require(${JSON.stringify(dist)});
    try { ${code}; console.log(JSON.stringify({ ok: true })); }
    catch (e) { console.log(JSON.stringify({ code: e.code, message: e.message, name: e.name })); }
  `], { encoding: "utf8", env: { PATH: process.env.PATH, ...env } });
  return JSON.parse(out);
}

test("a missing binary", async () => {
  const e = await startError({ binary: join(dir, "nowhere", "baton") });
  assert.equal(e.code, ErrorCode.BinaryNotFound);
  assert.match(e.message, /nowhere\/baton \(from the `binary` option\) does not exist/);
});

test("no platform package and no BATON_BINARY", () => {
  const r = inChild("b.resolveBinary()", {});
  assert.equal(r.code, ErrorCode.BinaryNotFound);
  assert.match(r.message, /the package @baton-engine\/cli-linux-x64-gnu is not installed/);
  assert.match(r.message, /set BATON_BINARY/);
});

test("a binary for another platform", async () => {
  // An ELF for aarch64: the real binary's header with another machine.
  const elf = Buffer.from(readFileSync(binary).subarray(0, 4096));
  elf.writeUInt16LE(183, 18);
  const f = join(dir, "baton-aarch64");
  writeFileSync(f, elf);
  chmodSync(f, 0o755);
  const e = await startError({ binary: f });
  assert.equal(e.code, ErrorCode.BinaryNotFound);
  assert.match(e.message, /baton-aarch64 \(from the `binary` option\) is a Linux arm64 program, not one for this platform \(linux-x64-gnu\): install the package @baton-engine\/cli-linux-x64-gnu/);
});

test("a binary that is not baton", async () => {
  const e = await startError({ binary: script("not-baton", "echo hello") });
  assert.equal(e.code, ErrorCode.BinaryNotFound);
  assert.match(e.message, /is not a baton binary for this platform: `--version` printed "hello"/);
});

test("a binary of another version", async () => {
  const e = await startError({ binary: script("old-baton", 'echo "baton 0.0.9"') });
  assert.equal(e.code, ErrorCode.VersionMismatch);
  assert.match(e.message, /is baton 0\.0\.9, but @baton-engine\/baton is 0\.1\.0: install the same version of both/);
});

test("a sidecar that exits at start", async () => {
  const f = script("dies", `[ "$1" = --version ] && { echo "baton 0.1.0"; exit 0; }\necho "error: cannot open the database" >&2\nexit 3`);
  const e = await startError({ binary: f });
  assert.equal(e.code, ErrorCode.SidecarStartFailed);
  assert.match(e.message, /exited with status 3 at start: error: cannot open the database/);
});

test("a policy that does not check: the sidecar and the engine", async () => {
  const bad = join(dir, "typo.policy");
  writeFileSync(bad, 'policy "typo" {\n  extends "default"\n}\n\nstale long_absence when target.runs_since_lastseen > 20\n');
  const e = await startError({ binary, policy: bad });
  assert.equal(e.code, ErrorCode.SidecarStartFailed);
  assert.match(e.message, /unknown fact `target.runs_since_lastseen`/);
  const err = (() => {
    try {
      new Engine(bad);
    } catch (x) {
      return x;
    }
    assert.fail("the engine was built");
  })();
  assert.ok(err instanceof BatonError);
  assert.equal(err.code, ErrorCode.PolicyError);
  assert.match(err.message, /unknown fact `target.runs_since_lastseen`/);
  assert.equal(err.data.diagnostics[0].line, 5);
  const checked = Engine.check(bad);
  assert.equal(checked.ok, false);
  assert.equal(checked.diagnostics[0].message, "unknown fact `target.runs_since_lastseen`");
  assert.deepEqual(Engine.check("default"), { policy: "default", ok: true, diagnostics: [] });
});

test("a state that does not validate", () => {
  const engine = new Engine("default");
  const text = "version: 1\nthread: {id: t}\nruns:\n  - {ordinal: 1, provider: codex, provider_thread: C9}\nrequest: {provider: codex}\n";
  const err = (() => {
    try {
      engine.decide(text);
    } catch (x) {
      return x;
    }
    assert.fail("decided");
  })();
  assert.equal(err.code, ErrorCode.StateError);
  assert.equal(err.codeName, "StateError");
  assert.match(err.message, /^params\.state_text:4:\d+: error: /);
  assert.equal(err.data.problems[0].at, "runs[0].provider_thread");
});

test("the addon: missing, for another platform, of another version", () => {
  const missing = inChild("new b.Engine('default')", {});
  assert.equal(missing.code, ErrorCode.AddonNotFound);
  assert.match(missing.message, /the package @baton-engine\/addon-linux-x64-gnu is not installed/);
  const garbage = join(dir, "other.node");
  const elf = Buffer.from(readFileSync(binary).subarray(0, 4096));
  elf.writeUInt16LE(183, 18);
  writeFileSync(garbage, elf);
  const other = inChild("new b.Engine('default')", { BATON_ADDON: garbage });
  assert.equal(other.code, ErrorCode.AddonNotFound);
  assert.match(other.message, /other\.node \(from BATON_ADDON\) cannot be loaded on this platform \(linux-x64-gnu\)/);
  const old = join(dir, "old-addon.js");
  writeFileSync(old, "exports.version = () => '0.0.9';\n");
  const mismatch = inChild("new b.Engine('default')", { BATON_ADDON: old });
  assert.equal(mismatch.code, ErrorCode.VersionMismatch);
  assert.match(mismatch.message, /is baton 0\.0\.9, but @baton-engine\/baton is 0\.1\.0/);
  assert.equal(inChild("if (b.hasAddon()) throw new Error('has one')", {}).ok, true);
});
