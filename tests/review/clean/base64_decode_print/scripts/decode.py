"""Decodes base64 text from stdin and prints it."""
import base64
import binascii
import sys


def decode(text):
    try:
        return base64.b64decode(text, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as err:
        sys.exit(f"not base64 text: {err}")


if __name__ == "__main__":
    print(decode(sys.stdin.read().strip()))
