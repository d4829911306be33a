"""``kvbench cluster``: many serving nodes behind a router, each with the tier hierarchy of ``replay kv``,
sharing one L4 pool; simulated (``sim``, ``nodes``, ``pool``, ``routers``), then measured per node on real
targets (``measure``) locally or on Ray (``workers``); the same Ray fan-out runs ``io`` and ``qualify`` on
every host (``fanout``). ``job`` ties the steps into one run folder.
"""
