"""The machinery every layer is written against, and that knows nothing of them: the
:class:`~disentangle._core.registry.Registry`, value checks, atomic file writes, submodule
discovery, the CLIs' shared runner, the CPU thread count and OpenMP's wait policy, the names of the config's choices, and the process-group
primitives (:mod:`~disentangle._core.distributed`: the per-step noise drawn for the global batch,
gathers across processes) that objectives use so that a multi-process run computes the
single-process loss."""
