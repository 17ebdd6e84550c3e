// A provider switcher: the user of a coding app moves a thread from Codex to another provider.
// The app asks baton why and how (explain), starts the run (dispatch: the handoff document is
// written off-band and recorded), and gives the new provider the pointer prompt.
//
//   node dist/main.js [TARGET]      (TARGET: claude, cursor, gemini, ...; default claude)
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BatonClient, BatonError, Engine, hasAddon, type State } from "@baton-engine/baton";

const target = process.argv[2] ?? "claude";

// The thread as the app knows it: one run on Codex, and the user now asks for `target`.
const state: State = {
  version: 1,
  thread: { id: "th_oauth", title: "Add GitHub OAuth login" },
  provider_threads: [{ id: "C1", provider: "codex" }],
  runs: [
    {
      ordinal: 1,
      provider: "codex",
      provider_thread: "C1",
      items: [
        { kind: "user_message", text: "Add GitHub OAuth login." },
        { kind: "assistant_message", text: "Added the callback route and a session cookie." },
        { kind: "file_change", path: "src/auth/github.ts", change: "created" },
      ],
    },
  ],
  request: { provider: target, message: "Review the flow for CSRF." },
};

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "provider-switcher-"));
  // The engine in process when the addon is installed for this platform; the sidecar does
  // the same otherwise.
  const engine = hasAddon() ? new Engine("default", { documentRoot: dir }) : undefined;
  const client = await BatonClient.start({ db: join(dir, "app.db"), handoffDir: dir, timeoutMs: 30_000 });
  try {
    await client.importThread({ state: { ...state, request: { provider: "codex" } } });
    // 1. Explain: what the switch will do, and why.
    const why = engine ? engine.explain(state) : await client.explain({ state, target });
    console.log(why.explanation.split("\n")[0]);
    console.log(`decided by ${why.decision.decided_by.rule} (${why.decision.decided_by.because ?? "-"})`);
    // 2. Dispatch: decide again on the stored thread, write the handoff, record the run.
    const run = await client.dispatch({ thread: "th_oauth", target, message: "Review the flow for CSRF." });
    console.log(`run ${run.recorded.run} started on ${target} (${run.strategy}), provider thread ${run.recorded.provider_thread}`);
    // 3. The first prompt the new provider gets: a pointer to the handoff document.
    console.log(`pointer prompt: ${run.handoff?.inline ?? "(none: the provider's own thread goes on)"}`);
  } catch (e) {
    if (e instanceof BatonError) console.error(`baton error ${e.code} (${e.codeName}): ${e.message}`);
    throw e;
  } finally {
    await client.close();
  }
}

main().catch(() => {
  process.exitCode = 1;
});
