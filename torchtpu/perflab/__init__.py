"""perflab: torchtpu's benchmark suite (``python -m torchtpu.perflab``, ``make
bench``; see docs/perflab.md) and the reference models it measures
(models.py)."""
