"""stagelens: split LLM-service latency into stages from production logs."""

import os

__version__ = "0.1.0"

# NumPy's OpenBLAS starts a thread per core when NumPy is first imported, and each spins for a
# while before it sleeps: ~0.1 CPU s of every process that loads NumPy (an import of 1 M SGLang
# lines spent 2 % of its CPU in ``blas_thread_server``; docs/benchmarks.md). stagelens's only
# matrix products are the report's bootstrap means (200 replicates: milliseconds on one
# thread), so one thread is enough. A thread count the user chose for OpenBLAS is kept.
if not any(v in os.environ for v in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")):
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
