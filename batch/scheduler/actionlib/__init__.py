"""What the actions share and no plugin needs: victim selection and eviction on a node
(``victims``), gang eviction by bundles (``gang_victims``, ``bundles``), the queue floors that
reclaim and gangreclaim keep (``queue_floor``), the starving-job and preemptor-task walks
(``selection``) and the priority queue the job loops pop from (``pq``).

It sits between the actions and the framework: it imports the framework, never an action or a
plugin, and no plugin imports it (import-linter contracts check both).
"""
