"""Unpack an Office file into a directory of XML."""
import sys
print(sys.argv)
