#!/usr/bin/env python3
"""Count the words, lines and characters of --text and print them as JSON."""
import argparse
import json

parser = argparse.ArgumentParser()
parser.add_argument("--text", required=True)
args = parser.parse_args()
text = args.text
print(json.dumps({"words": len(text.split()), "lines": len(text.splitlines()), "chars": len(text)}))
