"""Pack a directory of XML into an Office file."""
import sys
print(sys.argv)
