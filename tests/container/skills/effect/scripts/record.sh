#!/usr/bin/env bash
# Append one line per run to /effects/record.log: the marker and the host
# (container) that ran it.
set -euo pipefail
printf '%s %s\n' "$1" "$HOSTNAME" >>/effects/record.log
echo "recorded $1 on $HOSTNAME"
