"""The `tephra` command: thin wrappers that parse arguments and call the layers below."""
