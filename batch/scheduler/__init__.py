"""The pure scheduling cycle: session framework, actions, plugins and configuration. No I/O."""
