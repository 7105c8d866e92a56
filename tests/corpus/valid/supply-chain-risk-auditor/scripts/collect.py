#!/usr/bin/env python3
# /// script
# requires-python = ">=3.9"
# dependencies = []
# ///
"""
Collect the dependency list.

Longer text that is not the summary.
"""
print("collected")
