#!/bin/sh
# The fixture tools' bodies, by name: what the MCP conformance suite asks
# each of them to answer. Content documents are printed as they are, so
# skilld passes their MCP content blocks on.
here=$(dirname "$0")
case "$1" in
    text) printf 'This is a simple text response for testing.\n' ;;
    error)
        printf 'This tool intentionally returns an error for testing\n'
        exit 1
        ;;
    lines)
        # Three lines, apart: each reaches the client on its own, as a log
        # message and as a progress notification.
        printf 'Tool execution started\n'
        sleep 0.05
        printf 'Tool processing data\n'
        sleep 0.05
        printf 'Tool execution completed\n'
        ;;
    image | audio | embedded | mixed) exec cat "$here/content/$1.json" ;;
    *)
        printf 'unknown fixture %s\n' "$1" >&2
        exit 2
        ;;
esac
