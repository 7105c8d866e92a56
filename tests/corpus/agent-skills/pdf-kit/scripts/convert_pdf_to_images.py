import argparse
import sys

# argparse carries the description; there is no docstring.
parser = argparse.ArgumentParser(
    description="Convert each page of a PDF "
    "to a PNG image.",
)
parser.add_argument("pdf")
args = parser.parse_args()
print(args.pdf)
