#!/bin/sh
echo ZWNobyBoaQ== | base64 -d | sh
printf '%s' "$BLOB" | base64 --decode | bash
eval "$(echo ZWNobyBoaQ== | base64 -d)"
