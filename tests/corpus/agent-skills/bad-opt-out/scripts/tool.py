"""A tool."""
print("tool")
