#!/usr/bin/env bash
# Every file a comment or a document names exists: each `name.rs`, `dir/name.md`, … found in
# the comments of the Rust sources and in README.md and docs/*.md (not the dated journal,
# which tells history) must be a file of the repository, matched by its path's tail (so
# `segment.rs`, `wal/segment.rs` and `crates/ferrite/src/wal/segment.rs` all name the same
# file). Names outside the repository (`../shared/…`) and in URLs are not checked.
set -euo pipefail
cd "$(dirname "$0")/.."

files=$(git ls-files --cached --others --exclude-standard)
missing=0
check() { # $1: where the name was found, $2: the name
    local name=$2
    name=${name#./}
    if ! grep -qE "(^|/)${name//./\\.}$" <<<"$files"; then
        echo "$1: names $2, which does not exist" >&2
        missing=1
    fi
}

pattern='[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.(rs|md|sh|toml)\b'
while IFS= read -r source; do
    # Comment text only: from `//` to the end of the line.
    while IFS=: read -r line text; do
        for name in $(grep -oE "$pattern" <<<"$text" | sort -u); do
            [[ $name == ../* || $text == *"://"*"$name"* ]] && continue
            check "$source:$line" "$name"
        done
    done < <(grep -nE '^\s*//|[^:]//[ !/]' "$source" | sed -E 's#^([0-9]+):.*//#\1:#')
done < <(grep -E '\.rs$' <<<"$files")

while IFS= read -r doc; do
    while IFS=: read -r line text; do
        for name in $(grep -oE "$pattern" <<<"$text" | sort -u); do
            [[ $name == ../* || $text == *"://"*"$name"* ]] && continue
            check "$doc:$line" "$name"
        done
    done < <(grep -nE "$pattern" "$doc")
done < <(grep -E '^(README\.md|docs/[^/]+\.md)$' <<<"$files")

if [[ $missing == 1 ]]; then
    echo "error: comments or documents name files that do not exist" >&2
    exit 1
fi
echo "every file named in comments and documents exists"
