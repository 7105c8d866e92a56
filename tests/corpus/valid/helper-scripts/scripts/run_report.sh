#!/usr/bin/env bash
# Print the report,
# one section per line.
echo report
