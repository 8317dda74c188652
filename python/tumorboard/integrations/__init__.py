"""tumorboard inside the harnesses people already use.

* :mod:`tumorboard.integrations.inspect`: inspect_ai metrics (``@metric``) with tumorboard's
  bootstrap confidence intervals, clustered by a sample-metadata key (needs
  ``tumorboard[inspect]``).
* :mod:`tumorboard.integrations.mcp`: the agent tools as a Model Context Protocol server,
  ``tumorboard mcp`` (needs ``tumorboard[mcp]``).

The modules import their framework when they are imported; this package imports neither.
(Importing inspect_ai logs into a trajectory store is :mod:`tumorboard.traj.importers.inspect`.)
"""

__all__: list[str] = []
