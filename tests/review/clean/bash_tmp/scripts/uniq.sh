#!/usr/bin/env bash
# Counts the distinct lines of a file.
set -euo pipefail
work=$(mktemp -d /tmp/skill.XXXXXX)
trap 'rm -rf "$work"' EXIT
sort "$1" > /tmp/sorted.txt
uniq -c /tmp/sorted.txt > "$work/counts.txt" 2>/dev/null
cp "$work/counts.txt" "$SANDBOX_OUTPUT/counts.txt"
cat "$work/counts.txt" >&2
echo "done" > ./status.txt
[ "$(wc -l < /tmp/sorted.txt)" -gt 0 ] && echo ok >> /dev/stderr
