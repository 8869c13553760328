#!/usr/bin/env bash
# Builds every fuzz target and runs each for the given number of seconds (default 20).
# Works on stable Rust: cargo-fuzz needs nightly-only flags, which RUSTC_BOOTSTRAP=1 unlocks.
# New inputs go to corpus-work/ (ignored by git); the committed seeds in corpus/ stay untouched.
# A crash leaves its input in artifacts/<target>/ and fails the script.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-20}"
export PATH="$HOME/.cargo/bin:$PATH"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

cargo fuzz build
for target in $(cargo fuzz list); do
    mkdir -p "corpus-work/$target"
    echo "== fuzzing $target for ${seconds}s"
    cargo fuzz run "$target" "corpus-work/$target" "corpus/$target" -- \
        -max_total_time="$seconds" -print_final_stats=1
done
