"""Would be an entrypoint, were scripts tools here."""
print("no")
