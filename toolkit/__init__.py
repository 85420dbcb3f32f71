"""stagelens: split LLM-service latency into stages from production logs."""

__version__ = "0.1.0"
