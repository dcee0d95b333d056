"""What heads mix: token-mixing matrices, the Gather/Aggregate roles read from them, and the G&A
masks that restrict them.

- :mod:`.mixing`: each head's (T, T) mixing matrix (attention weights, materialised SSM kernels).
- :mod:`.ga_roles`: heads classified as Gather or Aggregate from those matrices on the KV probe.
- :mod:`.ga_masks`: the masks of the MMLU-format masking experiment (which token pairs may mix).

May import: ``errors``, ``models``; never the interventions (they import the masks and matrices).
"""
