"""What several plugins share and no action needs: duration arguments and estimates
(``durations``: sjf, tiresias, minruntime, reservation, proportion's usage decay) and node
selector / affinity matching (``matching``: predicates, nodeorder).

It sits between the plugins and the framework: it imports the framework, never an action or a
plugin, and no action imports it (import-linter contracts check both).
"""
