"""Writes a report of a CSV file."""
import argparse
import csv
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--in", dest="path", required=True)
    args = parser.parse_args()
    with open(args.path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        sys.stdout.write(",".join(row.values()) + "\n")


if __name__ == "__main__":
    main()
