#!/usr/bin/env bash
# The npm packages end to end (docs/node.md), run by .ci/run:
#  1. the release `baton` binary and the napi addon, each built once, in the one target dir;
#  2. one version everywhere, and the generated TypeScript types match `baton schema`;
#  3. the main package built (CommonJS + ESM + .d.ts) and its tests (node --test) run against
#     the real binary and addon;
#  4. every package packed, the tarballs installed into a scratch project without the registry
#     and with no Rust toolchain on PATH, and the example app (examples/provider-switcher)
#     type-checked and run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
export CARGO_TARGET_DIR="$TARGET"
START=$SECONDS

# 1. One release build of each (the addon reuses the dependencies the binary compiled).
cargo build --release --locked --bin baton
(cd npm/addon && cargo build --release --locked)
BIN="$TARGET/release/baton"
ADDON="$TARGET/release/libbaton_node.so"

# 2. The addon crate's formatting, one version everywhere, and the types against the schemas.
(cd npm/addon && cargo fmt --check)
node npm/check-versions.mjs
(cd npm && npm ci --no-audit --no-fund --silent)
node npm/packages/baton/scripts/gen-types.mjs "$BIN" --check

# 3. Build and test the main package against the release build (the environment overrides a
#    local build uses).
node npm/packages/baton/scripts/build.mjs
install -D -m 0755 "$BIN" npm/packages/cli-linux-x64-gnu/bin/baton
install -D -m 0755 "$ADDON" npm/packages/addon-linux-x64-gnu/baton.linux-x64-gnu.node
(cd npm/packages/baton && BATON_BINARY="$BIN" BATON_ADDON="$ADDON" node --test --test-concurrency=1 test/*.test.mjs)

# 4. Pack, install offline into a scratch project, type-check and run the example app with no
#    Rust toolchain on PATH.
SCRATCH="$(mktemp -d)"
trap 'rm -rf "$SCRATCH"' EXIT
for p in cli-linux-x64-gnu addon-linux-x64-gnu baton; do
  (cd "npm/packages/$p" && npm pack --silent --pack-destination "$SCRATCH" >/dev/null)
done
cp -r examples/provider-switcher "$SCRATCH/app"
rm -rf "$SCRATCH/app/node_modules" "$SCRATCH/app/dist"
NODE_DIR="$(dirname "$(command -v node)")"
(
  cd "$SCRATCH/app"
  export PATH="$NODE_DIR:/usr/bin:/bin"
  unset BATON_BINARY BATON_ADDON
  if command -v cargo || command -v rustc; then
    echo "npm/ci.sh: a Rust toolchain is on PATH for the packed install" >&2
    exit 1
  fi
  # The packages from their tarballs, nothing from the registry. TypeScript and the Node types
  # are the tooling's (npm/node_modules), not installed again.
  node -e 'const fs = require("fs"); const p = JSON.parse(fs.readFileSync("package.json", "utf8"));
    delete p.dependencies; delete p.devDependencies; fs.writeFileSync("package.json", JSON.stringify(p, null, 2));'
  TSC=("$ROOT/npm/node_modules/.bin/tsc" --typeRoots "$ROOT/npm/node_modules/@types")
  npm install --offline --no-audit --no-fund --silent \
    "$SCRATCH"/baton-engine-cli-linux-x64-gnu-*.tgz \
    "$SCRATCH"/baton-engine-addon-linux-x64-gnu-*.tgz \
    "$SCRATCH"/baton-engine-baton-*.tgz
  # The app and every `ts` block of docs/node.md type-check against the installed packages.
  node -e '
    const fs = require("fs");
    const blocks = [...fs.readFileSync(process.argv[1], "utf8").matchAll(/^```ts\n([\s\S]*?)^```$/gm)];
    if (!blocks.length) throw new Error("no ts block in docs/node.md");
    blocks.forEach((m, i) => fs.writeFileSync(`src/doc-node-${i + 1}.ts`, m[1]));
  ' "$ROOT/docs/node.md"
  "${TSC[@]}" --noEmit -p .
  rm src/doc-node-*.ts
  "${TSC[@]}" -p .
  OUT="$(node dist/main.js claude)"
  echo "$OUT"
  grep -q "^run 2 on claude: full_new" <<<"$OUT"
  grep -q "^pointer prompt: " <<<"$OUT"
  # The ESM entry, and the `baton` bin running the platform binary.
  VERSION="$(node -p 'require("@baton-engine/baton/package.json").version')"
  OUT_ESM="$(node --input-type=module -e 'import { Engine, VERSION } from "@baton-engine/baton"; console.log(VERSION, new Engine("default").policy.name)')"
  [ "$OUT_ESM" = "$VERSION default" ]
  [ "$(npx --offline baton --version)" = "baton $VERSION" ]
)
echo "npm/ci.sh: $((SECONDS - START)) s"
