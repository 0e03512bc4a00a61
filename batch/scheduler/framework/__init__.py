"""The session framework: what every action and plugin builds on, and nothing else.

Session state and its journal, the typed extension points (hooks) plugins register callbacks on,
the dispatch that combines them with Volcano's tier rules, statements, the placement engine and
the decisions a session closes with. The framework never imports an action or a plugin (an
import-linter contract checks it); ``batch.scheduler.builtins`` registers them by name. Code
only actions share lives in ``batch.scheduler.actionlib``, code only plugins share in
``batch.scheduler.pluginlib``; the framework imports neither.
"""
