// Shared by the tests (node --test): the repository's paths, scratch directories, the gated
// summarizer policy, and waiting for events. Run by npm/ci.sh with BATON_BINARY and
// BATON_ADDON pointing at the release build.
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, openSync, closeSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const repo = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");
export const binary = process.env.BATON_BINARY;
if (!binary) throw new Error("set BATON_BINARY (and BATON_ADDON) to the release build (npm/ci.sh does)");

/** Every example state (examples/*.yaml), as [name, text]. */
export const examples = readdirSync(join(repo, "examples"))
  .filter((f) => f.endsWith(".yaml"))
  .sort()
  .map((f) => [f, readFileSync(join(repo, "examples", f), "utf8")]);

/** Every shipped policy: the profiles, and the files under policies/. */
export const policies = [
  "default",
  "t3code",
  "t3code-legacy",
  "mcode",
  ...readdirSync(join(repo, "policies"))
    .filter((f) => f.endsWith(".policy"))
    .sort()
    .map((f) => join(repo, "policies", f)),
];

export const scratch = (name) => mkdtempSync(join(tmpdir(), `baton-npm-${name}-`));

/** Run the CLI; its `--json` output parsed. */
export function cli(args, opts = {}) {
  return JSON.parse(execFileSync(binary, args, { encoding: "utf8", ...opts }));
}

/** The first emission of `event` by `emitter`, as a promise of its arguments. */
export function once(emitter, event) {
  return new Promise((resolve) => emitter.once(event, (...a) => resolve(a)));
}

/**
 * A policy whose summarizer waits until the test lets it go: `started()` resolves when a
 * render is inside the summarizer, `release()` lets every waiting one finish. Events, not
 * deadlines (tests/serve_support GatedPolicy does the same for the Rust tests).
 */
export function gatedPolicy(dir) {
  const started = join(dir, "started.fifo");
  const go = join(dir, "go.fifo");
  execFileSync("mkfifo", [started, go]);
  const script = join(dir, "gated.sh");
  writeFileSync(
    script,
    `#!/bin/sh\ncat >/dev/null\necho started > '${started}'\nread go < '${go}'\necho '## Summary'\necho 'Written when let go.'\n`,
  );
  chmodSync(script, 0o755);
  const policy = join(dir, "gated.policy");
  writeFileSync(
    policy,
    `policy "gated" {\n  extends "default"\n}\n\nsummary {\n  include user_message into goals\n  source command "${script}" timeout_ms 600000\n}\n`,
  );
  return {
    policy,
    // Opening the FIFO for reading waits for the summarizer to open it for writing.
    started: async () => (await readFile(started, "utf8")).trim(),
    release: () => {
      // Opening for writing waits for the summarizer to open it for reading.
      const fd = openSync(go, "w");
      writeFileSync(fd, "go\n");
      closeSync(fd);
    },
  };
}

/** Whether process `pid` is gone (no entry, not even a zombie). */
export function processGone(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return !stat;
  } catch {
    return true;
  }
}

/** A state of examples/ by name. */
export const example = (name) => readFileSync(join(repo, "examples", name), "utf8");
