#!/usr/bin/env bash
# cargo deny against deny.toml: licences, bans and sources always; security
# advisories (RustSec: vulnerabilities, unsound and unmaintained crates,
# yanked versions) only when a copy of the advisory database is at hand.
#
# The database is a git repository (rustsec/advisory-db) that cargo-deny
# clones from its git host, which the build machines and CI cannot reach, and
# no package registry carries it. So:
#   ADVISORY_DB=/path/to/advisory-db  a local git repository (bare or not,
#                                     with a `main` branch) holding a copy;
#                                     cargo-deny clones it through git's
#                                     url.<path>.insteadOf, fully offline
#   ADVISORY_DB=online                let cargo-deny fetch it (a machine with
#                                     access to the git host)
#   unset                             advisories are skipped, and this says so
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
deny=$("$root/hack/cargo-tool.sh" cargo-deny | tail -n1)
cd "$root"

"$deny" deny --manifest-path Cargo.toml check --hide-inclusion-graph licenses bans sources

# cargo-deny's default database URL, spelled as it spells it (insteadOf is
# case-sensitive).
upstream=https://github.com/RustSec/advisory-db
case "${ADVISORY_DB:-}" in
  "")
    echo "advisories: SKIPPED, no advisory database (set ADVISORY_DB to a local copy of" \
      "rustsec/advisory-db, or ADVISORY_DB=online; see hack/deny.sh)" >&2
    ;;
  online)
    "$deny" deny --manifest-path Cargo.toml check advisories
    ;;
  *)
    db=$(cd "$ADVISORY_DB" && pwd)
    git -C "$db" rev-parse --verify --quiet main >/dev/null ||
      { echo "ADVISORY_DB=$db is not a git repository with a main branch" >&2; exit 1; }
    echo "advisories: database $db, main at $(git -C "$db" log -1 --format='%h of %cs' main)" >&2
    # cargo-deny runs `git clone|fetch <upstream>`; git reads this from the
    # environment (GIT_CONFIG_COUNT) and clones the local copy instead.
    GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0="url.file://$db.insteadOf" GIT_CONFIG_VALUE_0="$upstream" \
      "$deny" deny --manifest-path Cargo.toml check advisories
    ;;
esac
