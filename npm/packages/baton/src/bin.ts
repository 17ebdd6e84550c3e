#!/usr/bin/env node
// `npx baton ...`: runs the platform package's `baton` binary (or $BATON_BINARY) with the
// same arguments, standard streams and exit status.
import { spawnSync } from "node:child_process";
import { BatonError } from "./errors.js";
import { resolveBinary } from "./platform.js";

try {
  const r = spawnSync(resolveBinary(), process.argv.slice(2), { stdio: "inherit" });
  if (r.signal) process.kill(process.pid, r.signal);
  process.exit(r.status ?? 1);
} catch (e) {
  console.error(e instanceof BatonError ? `baton: ${e.message}` : e);
  process.exit(1);
}
