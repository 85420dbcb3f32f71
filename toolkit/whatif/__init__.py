"""``stagelens whatif``: replay a window's arrivals through a capacity model calibrated from the logs.

``calibrate`` fits a per-replica service model from the dataset's own server records (view
``whatif_inputs`` in ``queries/80_whatif_inputs.sql``); ``simulate`` replays arrivals through a
discrete-event simulation of continuous batching; ``scenarios`` runs the as-observed replay first
(fidelity) and then the requested configurations; ``render`` writes the table, the sentence, the
JSON and the HTML page.
"""
